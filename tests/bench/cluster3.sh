#!/bin/sh
# Three Warren nodes on loopback: AMQP 5701..5703, cluster 5711..5713,
# data under $DIR (default /tmp/warren3); stop them with
#   kill $(cat /tmp/warren3/w*/pid)
#
#   go build -o /tmp/warren ./cmd/warren && tests/bench/cluster3.sh /tmp/warren
set -e
bin=$1
for i in 1 2 3; do
  d=${DIR:-/tmp/warren3}/w$i; rm -rf $d; mkdir -p $d
  seeds=""; [ $i -gt 1 ] && seeds='"127.0.0.1:5711"'
  printf '[admin]\nlisten = ""\n[cluster]\nnode_name = "w%s"\nlisten = "127.0.0.1:571%s"\nseeds = [%s]\nsecret = "a secret of sixteen+"\n' $i $i "$seeds" > $d/broker.toml
  $bin -config $d/broker.toml -listen 127.0.0.1:570$i -stream off -data $d/data > $d/log 2>&1 &
  echo $! > $d/pid
  sleep 2
done

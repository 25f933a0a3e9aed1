#!/bin/sh
# A private RabbitMQ node (Debian's rabbitmq-server, run as root) for
# topicunbind: node topicunbind@localhost, AMQP on 127.0.0.1:5792, no
# plugins, data and logs under DIR (default /tmp/topicunbind-rmq), which
# it wipes first.
#   tests/bench/topicunbind/rabbitmq.sh start [DIR]
#   tests/bench/topicunbind/rabbitmq.sh pid [DIR]     the node's beam.smp
#   tests/bench/topicunbind/rabbitmq.sh stop [DIR]
set -e
d=${2:-/tmp/topicunbind-rmq}
node=topicunbind@localhost
run() {
  (cd /var/lib/rabbitmq && env RABBITMQ_NODENAME=$node RABBITMQ_NODE_PORT=5792 RABBITMQ_DIST_PORT=25792 \
    RABBITMQ_MNESIA_BASE=$d/mnesia RABBITMQ_LOG_BASE=$d/log RABBITMQ_ENABLED_PLUGINS_FILE=$d/enabled_plugins \
    RABBITMQ_FEATURE_FLAGS_FILE=$d/feature_flags RABBITMQ_CONFIG_FILE=$d/rabbitmq RABBITMQ_PID_FILE=$d/pid \
    su rabbitmq -s /bin/sh -c "$1")
}
case $1 in
start)
  rm -rf "$d"
  mkdir -p "$d/log" "$d/mnesia"
  echo "[]." > "$d/enabled_plugins"
  echo "listeners.tcp.default = 127.0.0.1:5792" > "$d/rabbitmq.conf"
  chown -R rabbitmq:rabbitmq "$d"
  run "/usr/lib/rabbitmq/bin/rabbitmq-server" > "$d/out.log" 2>&1 &
  run "/usr/lib/rabbitmq/bin/rabbitmqctl -n $node wait $d/pid --timeout 120"
  ;;
pid)
  cat "$d/pid"
  ;;
stop)
  run "/usr/lib/rabbitmq/bin/rabbitmqctl -n $node stop"
  ;;
*)
  echo "usage: $0 start|pid|stop [DIR]" >&2
  exit 2
  ;;
esac

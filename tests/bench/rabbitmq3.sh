#!/bin/sh
# Three RabbitMQ 3.10.8 nodes on one machine (Debian's rabbitmq-server,
# run as root): r1..r3@localhost, AMQP 5681..5683, management
# 15681..15683, data under /tmp/rmqc. Then join them:
#   cd /var/lib/rabbitmq; for i in 2 3; do su rabbitmq -s /bin/sh -c \
#     "/usr/lib/rabbitmq/bin/rabbitmqctl -n r$i@localhost stop_app &&
#      /usr/lib/rabbitmq/bin/rabbitmqctl -n r$i@localhost join_cluster r1@localhost &&
#      /usr/lib/rabbitmq/bin/rabbitmqctl -n r$i@localhost start_app"; done
set -e
for i in 1 2 3; do
  d=/tmp/rmqc/r$i
  mkdir -p $d/log $d/mnesia
  echo "[rabbitmq_management]." > $d/enabled_plugins
  cat > $d/rabbitmq.conf <<CONF
listeners.tcp.default = 568$i
management.tcp.port = 1568$i
loopback_users = none
CONF
  chown -R rabbitmq:rabbitmq $d
  (cd /var/lib/rabbitmq && env RABBITMQ_NODENAME=r$i@localhost RABBITMQ_MNESIA_BASE=$d/mnesia RABBITMQ_MNESIA_DIR=$d/mnesia/r$i \
    RABBITMQ_FEATURE_FLAGS_FILE=$d/feature_flags RABBITMQ_LOG_BASE=$d/log RABBITMQ_ENABLED_PLUGINS_FILE=$d/enabled_plugins \
    RABBITMQ_CONFIG_FILE=$d/rabbitmq RABBITMQ_DIST_PORT=2568$i \
    su rabbitmq -s /bin/sh -c "/usr/lib/rabbitmq/bin/rabbitmq-server" > $d/out.log 2>&1 &)
done

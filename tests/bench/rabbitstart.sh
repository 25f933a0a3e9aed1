#!/bin/sh
# Starts node rN of the cluster rabbitmq3.sh made (after a kill).
i=$1; d=/tmp/rmqc/r$i
(cd /var/lib/rabbitmq && env RABBITMQ_NODENAME=r$i@localhost RABBITMQ_MNESIA_BASE=$d/mnesia RABBITMQ_MNESIA_DIR=$d/mnesia/r$i \
    RABBITMQ_FEATURE_FLAGS_FILE=$d/feature_flags RABBITMQ_LOG_BASE=$d/log RABBITMQ_ENABLED_PLUGINS_FILE=$d/enabled_plugins \
    RABBITMQ_CONFIG_FILE=$d/rabbitmq RABBITMQ_DIST_PORT=2568$i \
    su rabbitmq -s /bin/sh -c "/usr/lib/rabbitmq/bin/rabbitmq-server" > $d/out2.log 2>&1 &)

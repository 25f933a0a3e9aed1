"""Seed 001's pika script (mandatory + alternate exchange), run against
127.0.0.1 instead of the seed's host. Prints one line per step, which the
Go test compares with what RabbitMQ prints."""
import sys

import pika
import pika.exceptions

port = int(sys.argv[1])
connection = pika.BlockingConnection(
    pika.ConnectionParameters(host="127.0.0.1", port=port, virtual_host="/",
                              credentials=pika.PlainCredentials("guest", "guest"),
                              connection_attempts=3, retry_delay=1))
channel = connection.channel()
channel.confirm_delivery()


def publish():
    try:
        channel.basic_publish(exchange="ex", routing_key="ae", body="Hello World!".encode("utf-8"),
                              properties=pika.BasicProperties(content_type="text/plain", delivery_mode=2),
                              mandatory=True)
        print("routed")
    except pika.exceptions.UnroutableError as e:
        print("UnroutableError", len(e.messages))
    except pika.exceptions.NackError as e:
        print("NackError", len(e.messages))


channel.queue_declare(queue="ae_queue", durable=False, auto_delete=True)
channel.exchange_declare(exchange="ae", exchange_type="topic", durable=False, auto_delete=True)
channel.queue_declare(queue="ex_queue", durable=False, auto_delete=True)
channel.exchange_declare(exchange="ex", exchange_type="topic", arguments={"alternate-exchange": "ae"},
                         durable=False, auto_delete=True)
channel.queue_bind(exchange="ex", queue="ex_queue", routing_key="ex")
# "uncomment this to test circle routing"
channel.exchange_bind(destination="ex", source="ae", routing_key="ae")
publish()
# "uncomment this to test alternative-exchange and mandatory"
channel.queue_bind(exchange="ae", queue="ae_queue", routing_key="ae")
publish()
method, props, body = channel.basic_get("ae_queue", auto_ack=True)
print("ae_queue", body.decode(), props.content_type, props.delivery_mode)
channel.queue_delete("ae_queue")
channel.queue_delete("ex_queue")
channel.exchange_delete("ex")
channel.exchange_delete("ae")
connection.close()

// A round of common amqplib calls: confirm channel, topic routing with
// *.stock.#, headers of several types, basic.get, and a channel error.
const amqp = require('amqplib');

(async () => {
  const port = process.argv[2];
  const conn = await amqp.connect(`amqp://guest:guest@127.0.0.1:${port}/`);
  const ch = await conn.createConfirmChannel();
  const q = await ch.assertQueue('', { exclusive: true });
  await ch.assertExchange('amqplib-topic', 'topic', { durable: false, autoDelete: true });
  await ch.bindQueue(q.queue, 'amqplib-topic', '*.stock.#');
  for (const key of ['usd.stock', 'stock.nasdaq', 'eur.stock.db']) {
    ch.publish('amqplib-topic', key, Buffer.from(key), { headers: { n: 1, s: 'x', a: [1, 'y'], t: { b: true } }, persistent: true });
  }
  await ch.waitForConfirms();
  for (;;) {
    const m = await ch.get(q.queue, { noAck: true });
    if (!m) break;
    console.log('got', m.fields.routingKey, m.content.toString(), JSON.stringify(m.properties.headers), m.properties.deliveryMode);
  }
  const other = await conn.createChannel();
  other.on('error', () => {});
  try {
    await other.checkExchange('amqplib-missing');
  } catch (e) {
    console.log('checkExchange', e.code);
  }
  await conn.close();
})().catch((e) => { console.error(e); process.exit(1); });

// Numbers, rates, sizes and times as an operator reads them.

export function num(n) {
  if (n === undefined || n === null || n === "") return "";
  if (typeof n !== "number") return String(n);
  return n.toLocaleString("en-US", { maximumFractionDigits: 2 });
}

// rate is a per-second figure with one decimal under 100.
export function rate(r) {
  if (r === undefined || r === null) return "";
  const v = Math.abs(r) < 100 ? Math.round(r * 10) / 10 : Math.round(r);
  return v.toLocaleString("en-US") + "/s";
}

// statRate reads "<key>_details".rate from a message_stats object.
export function statRate(ms, key) {
  const d = ms && ms[key + "_details"];
  return d ? rate(d.rate) : "";
}

export function bytes(n) {
  if (typeof n !== "number") return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}

export function time(ms) {
  if (!ms) return "";
  return new Date(ms).toLocaleString();
}

// json shows a value as compact JSON (arguments, definitions, properties).
export function json(v) {
  if (v === undefined) return "";
  const s = JSON.stringify(v);
  return s === "{}" || s === "[]" ? "" : s;
}

// flags are RabbitMQ's short feature marks: D durable, AD auto-delete,
// Excl exclusive, I internal, Args when arguments are set.
export function flags(o) {
  const f = [];
  if (o.durable) f.push("D");
  if (o.auto_delete) f.push("AD");
  if (o.exclusive) f.push("Excl");
  if (o.internal) f.push("I");
  if (o.arguments && Object.keys(o.arguments).length) f.push("Args");
  return f.join(" ");
}

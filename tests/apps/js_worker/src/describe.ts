// What a body arrived as, in JSON: its JS type and a JSON form of it.
export function describe(body: unknown): { type: string; body: unknown } {
  if (body instanceof Uint8Array) return { type: "Uint8Array", body: { b64: btoa(String.fromCharCode(...body)) } };
  if (body instanceof ArrayBuffer) return { type: "ArrayBuffer", body: { b64: btoa(String.fromCharCode(...new Uint8Array(body))) } };
  if (body instanceof Map) return { type: "Map", body: Object.fromEntries([...body].map(([k, v]) => [String(k), describe(v).body])) };
  if (body instanceof Set) return { type: "Set", body: [...body].map((v) => describe(v).body) };
  if (body instanceof Date) return { type: "Date", body: body.toISOString() };
  if (typeof body === "bigint") return { type: "bigint", body: body.toString() };
  if (body === undefined) return { type: "undefined", body: null };
  if (body === null) return { type: "null", body: null };
  if (Array.isArray(body)) return { type: "Array", body: body.map((v) => describe(v).body) };
  if (typeof body === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(body as object)) out[k] = describe(v).body;
    return { type: "object", body: out };
  }
  return { type: typeof body, body };
}

// ocd's own "cf/config": what a cf.config.ts imports when ocd evaluates it. Bindings are
// plain markers that ocd turns into its worker config; nothing here runs in the Worker.
const MARK = "__ocd_binding";

export function defineConfig(config) {
  return config;
}

const known = {
  queue: (options) => ({ [MARK]: "queue", ...options }),
  var: (value) => ({ [MARK]: "var", value }),
  // The secret's value never appears in the file: it names where ocd reads it from.
  secret: (from) => ({ [MARK]: "secret", ...(typeof from === "string" ? { env: from } : from) }),
};

// Any other kind (kv, d1, r2, ...) is kept as a marker so ocd can say which binding it
// does not provide, instead of a TypeError from a missing function.
export const bindings = new Proxy(known, {
  get: (target, kind) =>
    typeof kind === "string" && !(kind in target)
      ? (options) => ({ [MARK]: kind, ...(options ?? {}) })
      : target[kind],
});

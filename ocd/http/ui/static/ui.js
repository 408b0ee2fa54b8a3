// ocd dashboard: live numbers over one EventSource per tab, dialogs, selection, expanders.
// Pages work without this file; it only makes them live and nicer to drive by keyboard.
"use strict";
(function () {
  const base = document.body.dataset.base || "";
  let source = null;
  let lastStatus = 0;

  function lookup(data, path) {
    const parts = path.split(".");
    if (parts[0] === "sum") {
      return (data.queues || []).reduce((n, q) => n + (parts[1] === "sent" ? q.rates.sent : q[parts[1]] || 0), 0);
    }
    if (parts[0] !== "q") return undefined;
    const name = parts.slice(1, -1).join(".");
    let field = parts[parts.length - 1];
    let q = (data.queues || []).find((x) => x.name === name);
    if (!q && parts.length > 3 && parts[parts.length - 2] === "rates") {
      q = (data.queues || []).find((x) => x.name === parts.slice(1, -2).join("."));
      return q ? q.rates[field] : undefined;
    }
    if (!q) return undefined;
    if (field === "paused") return q.paused ? "paused" : "delivering";
    return q[field];
  }

  function apply(data) {
    document.querySelectorAll("[data-live]").forEach((el) => {
      const value = lookup(data, el.dataset.live);
      if (value === undefined || value === null) return;
      const text = String(value);
      if (el.textContent !== text) el.textContent = text;
    });
    const task = document.getElementById("task");
    if (task) {
      const t = (data.tasks || []).find((x) => x.id === task.dataset.task);
      if (t) {
        task.querySelectorAll("[data-task-field]").forEach((el) => {
          el.textContent = String(t[el.dataset.taskField]);
        });
        const bar = document.getElementById("task-progress");
        if (bar) { bar.max = Math.max(t.total, 1); bar.value = t.done; }
        const cancel = document.getElementById("cancel-form");
        if (cancel && t.state !== "running") cancel.hidden = true;
      }
    }
    const now = Date.now();
    const status = document.getElementById("live-status");
    if (status && now - lastStatus > 5000) {  // a polite summary at most every 5 s
      lastStatus = now;
      const ready = (data.queues || []).reduce((n, q) => n + q.ready, 0);
      status.textContent = ready + " ready message(s) in " + (data.queues || []).length + " queue(s)";
    }
  }

  function connect() {
    if (source || !window.EventSource) return;
    source = new EventSource(base + "/events");
    source.addEventListener("snapshot", (e) => apply(JSON.parse(e.data)));
  }
  function disconnect() {
    if (source) { source.close(); source = null; }
  }
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) disconnect(); else connect();
  });
  if (!document.hidden && !document.getElementById("token")) connect();

  // Dialogs: open/close buttons, typed confirmation.
  document.querySelectorAll("[data-open]").forEach((b) => {
    b.addEventListener("click", () => document.getElementById(b.dataset.open).showModal());
  });
  document.querySelectorAll("dialog [data-close]").forEach((b) => {
    b.addEventListener("click", () => b.closest("dialog").close());
  });
  document.querySelectorAll("input[data-must-equal]").forEach((input) => {
    const submit = input.form.querySelector("button[type=submit]");
    input.addEventListener("input", () => { submit.disabled = input.value !== input.dataset.mustEqual; });
  });

  // Confirm before a bulk action; the dialog returns focus to the button that opened it.
  const confirmDialog = document.getElementById("confirm-dialog");
  document.querySelectorAll("button[data-confirm]").forEach((b) => {
    b.addEventListener("click", (e) => {
      if (!confirmDialog || b.dataset.confirmed === "1") return;
      e.preventDefault();
      document.getElementById("confirm-text").textContent = b.dataset.confirm;
      confirmDialog.returnValue = "";
      confirmDialog.onclose = () => {
        if (confirmDialog.returnValue === "ok") {
          b.dataset.confirmed = "1";
          b.form.requestSubmit(b);
        } else {
          b.focus();
        }
      };
      confirmDialog.showModal();
    });
  });

  // Select all, and shift-click ranges.
  const all = document.getElementById("select-all");
  const rows = Array.from(document.querySelectorAll("input.row-select"));
  if (all) all.addEventListener("change", () => rows.forEach((r) => { r.checked = all.checked; }));
  let lastClicked = null;
  rows.forEach((r) => r.addEventListener("click", (e) => {
    if (e.shiftKey && lastClicked) {
      const [a, b] = [rows.indexOf(lastClicked), rows.indexOf(r)].sort((x, y) => x - y);
      rows.slice(a, b + 1).forEach((x) => { x.checked = r.checked; });
    }
    lastClicked = r;
  }));

  // Expanding a row loads its full body (escaped by the server).
  document.querySelectorAll("details[data-body]").forEach((d) => {
    d.addEventListener("toggle", () => {
      if (!d.open || d.dataset.loaded) return;
      d.dataset.loaded = "1";
      fetch(d.dataset.body, { credentials: "same-origin" })
        .then((r) => r.ok ? r.text() : Promise.reject(r.status))
        .then((html) => {
          const doc = new DOMParser().parseFromString(html, "text/html");
          const full = doc.querySelector(".full");
          if (full) d.querySelector(".full").replaceWith(document.importNode(full, true));
        })
        .catch(() => { d.dataset.loaded = ""; });
    });
  });
})();

// A run's event stream (Server-Sent Events) read with fetch, so that the token goes
// in the Authorization header (EventSource cannot set headers, and a token in the
// URL would be logged). A cut connection is resumed from the last record's id
// (Last-Event-ID): nothing lost, nothing twice. The stream's `end` event closes it.

import { headers, refuse } from "./api.js";

const RETRY_MIN = 500;
const RETRY_MAX = 5000;

/**
 * Follow `path`. `on.record(id, data)` for each record, `on.end(data)` once the run
 * has ended, `on.status(text)` as the connection changes ("live", "reconnecting",
 * "ended"). Returns `{close()}`.
 */
export function follow(path, on) {
  const ctl = new AbortController();
  let lastId = null;
  let done = false;
  let retry = RETRY_MIN;

  const dispatch = (ev) => {
    if (ev.event === "end") {
      done = true;
      on.end && on.end(ev.data);
      return;
    }
    if (ev.id !== null) lastId = ev.id;
    on.record(ev.id === null ? null : Number(ev.id), ev.data);
  };

  async function once() {
    const h = headers({ Accept: "text/event-stream" });
    if (lastId !== null) h["Last-Event-ID"] = lastId;
    const r = await fetch(path, { headers: h, signal: ctl.signal, cache: "no-store" });
    if (r.status === 401) {
      done = true;
      refuse();
      return;
    }
    if (!r.ok) throw new Error("HTTP " + r.status);
    on.status && on.status("live");
    retry = RETRY_MIN;
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    let ev = { id: null, event: null, data: [] };
    for (;;) {
      const { value, done: eof } = await reader.read();
      if (eof) break;
      buf += value;
      let at = 0;
      let nl;
      while ((nl = buf.indexOf("\n", at)) >= 0) {
        let line = buf.slice(at, nl);
        at = nl + 1;
        if (line.endsWith("\r")) line = line.slice(0, -1);
        if (line === "") {
          if (ev.data.length || ev.event) dispatch({ id: ev.id, event: ev.event, data: ev.data.join("\n") });
          ev = { id: null, event: null, data: [] };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "data") ev.data.push(val);
        else if (field === "id") ev.id = val;
        else if (field === "event") ev.event = val;
      }
      buf = buf.slice(at);
    }
  }

  (async () => {
    while (!done && !ctl.signal.aborted) {
      try {
        await once();
      } catch (e) {
        if (ctl.signal.aborted) return;
      }
      if (done || ctl.signal.aborted) break;
      on.status && on.status("reconnecting");
      await new Promise((res) => setTimeout(res, retry));
      retry = Math.min(retry * 2, RETRY_MAX);
    }
    if (done) on.status && on.status("ended");
  })();

  return { close: () => ctl.abort() };
}

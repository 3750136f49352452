// The API, with the token: kept in this tab's sessionStorage only, sent only as the
// Authorization header. A 401 anywhere forgets it and brings the login back.

const KEY = "capfleet.token";

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

/** An answer of the API that is no success: its status and its `{code, message}`. */
export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || "HTTP " + status);
    this.status = status;
    this.code = body && body.code;
    this.findings = (body && body.findings) || [];
    this.answeredBy = body && body.answered_by;
  }
}

const refused = new EventTarget();

/** `fn` is called when the server refuses the token (401). */
export function onRefused(fn) {
  refused.addEventListener("refused", fn);
}

export function headers(extra) {
  const h = Object.assign({}, extra);
  const t = token.get();
  if (t) h.Authorization = "Bearer " + t;
  return h;
}

/** Tell the console the token is refused (a 401 from the API or a stream). */
export function refuse() {
  token.clear();
  refused.dispatchEvent(new Event("refused"));
}

async function fail(r) {
  let body = null;
  try {
    body = await r.json();
  } catch (_) {
    body = null;
  }
  if (r.status === 401) refuse();
  throw new ApiError(r.status, body);
}

/** A request; the response when it succeeded, else an ApiError. */
export async function request(method, path, body, type) {
  const init = { method, headers: headers(), cache: "no-store" };
  if (body !== undefined) {
    init.headers["Content-Type"] = type || "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (!r.ok) await fail(r);
  return r;
}

export const getJson = async (path) => (await request("GET", path)).json();
export const getText = async (path) => (await request("GET", path)).text();
export const postJson = async (path, body, type) => (await request("POST", path, body, type)).json();

/** Try `candidate` as the token: the caller it names (`{name, role}`), or an ApiError. */
export async function login(candidate) {
  const r = await fetch("/v1/me", {
    headers: candidate ? { Authorization: "Bearer " + candidate } : {},
    cache: "no-store",
  });
  if (!r.ok) {
    let body = null;
    try {
      body = await r.json();
    } catch (_) {
      body = null;
    }
    throw new ApiError(r.status, body);
  }
  token.set(candidate);
  return r.json();
}

/** Fetch an artifact with the token and hand it to the browser as a download. */
export async function download(path, name) {
  const blob = await (await request("GET", path)).blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

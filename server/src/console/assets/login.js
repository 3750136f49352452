// The login: a token, tried against the API before it is kept. A wrong one says so
// and shows nothing else.

import { login } from "./api.js";
import { fill, h } from "./dom.js";

export function loginPage(main, error, done) {
  const input = h("input", {
    id: "token",
    type: "password",
    autocomplete: "off",
    spellcheck: false,
    testid: "login-token",
    attrs: { "aria-describedby": "login-help" },
  });
  const err = h("p", { class: "error", role: "alert", testid: "login-error", hidden: !error }, error || "");
  const submit = h("button", { type: "submit", class: "primary", testid: "login-submit" }, "Log in");
  const form = h(
    "form",
    {
      class: "login",
      on: {
        submit: async (e) => {
          e.preventDefault();
          submit.disabled = true;
          err.hidden = true;
          try {
            const who = await login(input.value.trim());
            await done(who);
          } catch (x) {
            err.textContent =
              x.status === 401
                ? "That token is not valid on this server."
                : "Cannot log in: " + x.message;
            err.hidden = false;
            input.select();
          } finally {
            submit.disabled = false;
          }
        },
      },
    },
    h("h1", {}, "capfleet console"),
    h("label", { htmlFor: "token" }, "Token"),
    input,
    h(
      "p",
      { id: "login-help", class: "help" },
      "A token of the server's token file (capfleet serve token add NAME --role ROLE). " +
        "It stays in this tab only. On a server without tokens, leave it empty.",
    ),
    err,
    submit,
  );
  fill(main, form);
  input.focus();
  return { close() {} };
}

//! The agent card (A2A §5): what the driver reads of it, from either spelling, and the
//! choice it makes once per peer — the JSON-RPC endpoint and the spelling to speak.
//!
//! 1.0 cards list `supportedInterfaces` (`url`, `protocolBinding`, `protocolVersion`);
//! 0.3 cards give `url`, `preferredTransport` (JSON-RPC when absent),
//! `protocolVersion` and `additionalInterfaces`. Security schemes come as 1.0's
//! field-named unions (`httpAuthSecurityScheme`, `apiKeySecurityScheme`, ...) or as
//! 0.3's OpenAPI objects (`type`: `http` / `apiKey` / ...).

use serde_json::Value;

use super::spelling::Spelling;

/// The extension URI a card advertises to be driven as a CAP agent (spec §11.1).
pub const CAP_EXTENSION: &str = "cap-protocol/v1";

/// The well-known card paths, newest first (the second is the 0.2-era name).
pub(crate) const CARD_PATHS: [&str; 2] =
    ["/.well-known/agent-card.json", "/.well-known/agent.json"];

/// One interface the card offers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Interface {
    pub url: String,
    /// `JSONRPC`, `GRPC`, `HTTP+JSON`.
    pub binding: String,
    /// The protocol version it speaks, as the card says it.
    pub version: String,
}

/// How a security scheme takes its secret.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SchemeKind {
    /// `Authorization: Bearer <secret>`.
    Bearer,
    /// The secret in a header of this name (A2A's `apiKey` in `header`).
    ApiKey { header: String },
    /// Anything else (OAuth 2, OpenID Connect, mTLS, API keys outside headers):
    /// named, not used.
    Unsupported { what: String },
}

/// One of the card's security schemes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Scheme {
    pub name: String,
    pub kind: SchemeKind,
}

/// What the driver reads of an agent card.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Card {
    /// Where the card was read.
    pub card_url: String,
    pub name: String,
    pub version: String,
    pub skills: Vec<String>,
    pub interfaces: Vec<Interface>,
    pub schemes: Vec<Scheme>,
    pub extensions: Vec<String>,
}

/// What the driver chose to speak with a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub endpoint: String,
    pub spelling: Spelling,
}

/// Why a card cannot be driven.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CardError {
    #[error("agent card {card_url}: not JSON an agent card is made of: {reason}")]
    Invalid { card_url: String, reason: String },
    #[error(
        "agent card {card_url} does not advertise the `{CAP_EXTENSION}` extension (spec §11.1); \
         to drive it as a plain A2A agent set `x-a2a-plain = true` under [fast_path]"
    )]
    NoCapExtension { card_url: String },
    #[error(
        "agent card {card_url} offers no JSON-RPC interface of A2A 1.0 or 0.3 (offers: {offered})"
    )]
    NoJsonRpc { card_url: String, offered: String },
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

impl Card {
    /// Reads a card fetched from `card_url`.
    pub fn parse(card_url: &str, v: &Value) -> Result<Card, CardError> {
        let invalid = |reason: &str| CardError::Invalid {
            card_url: card_url.to_owned(),
            reason: reason.to_owned(),
        };
        if !v.is_object() {
            return Err(invalid("not an object"));
        }
        let name = str_at(v, "name").ok_or_else(|| invalid("no `name`"))?;
        let skills = v
            .get("skills")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| str_at(s, "name").or_else(|| str_at(s, "id")))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let extensions = [
            v.get("capabilities").and_then(|c| c.get("extensions")),
            v.get("extensions"),
        ]
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|e| str_at(e, "uri"))
        .map(str::to_owned)
        .collect();
        Ok(Card {
            card_url: card_url.to_owned(),
            name: name.to_owned(),
            version: str_at(v, "version").unwrap_or("").to_owned(),
            skills,
            interfaces: interfaces(v),
            schemes: schemes(v),
            extensions,
        })
    }

    /// Whether the card advertises the CAP extension.
    pub fn has_cap_extension(&self) -> bool {
        self.extensions.iter().any(|e| e == CAP_EXTENSION)
    }

    /// Refuses a card without the CAP extension unless `plain` (the manifest's opt-in).
    pub fn check_extension(&self, plain: bool) -> Result<(), CardError> {
        if plain || self.has_cap_extension() {
            return Ok(());
        }
        Err(CardError::NoCapExtension {
            card_url: self.card_url.clone(),
        })
    }

    /// The JSON-RPC interface to speak: 1.0 where offered, else 0.3.
    pub fn choose(&self) -> Result<Choice, CardError> {
        [Spelling::V1, Spelling::V03]
            .into_iter()
            .find_map(|s| self.choose_spelling(s))
            .ok_or_else(|| CardError::NoJsonRpc {
                card_url: self.card_url.clone(),
                offered: self
                    .interfaces
                    .iter()
                    .map(|i| format!("{} {}", i.binding, i.version))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// The JSON-RPC interface of `spelling`, if the card offers one.
    pub fn choose_spelling(&self, spelling: Spelling) -> Option<Choice> {
        self.interfaces
            .iter()
            .filter(|i| i.binding.eq_ignore_ascii_case("JSONRPC"))
            .find(|i| Spelling::of_version(&i.version) == Some(spelling))
            .map(|i| Choice {
                endpoint: i.url.clone(),
                spelling,
            })
    }
}

/// 1.0's `supportedInterfaces`, then 0.3's `url` + `preferredTransport` and
/// `additionalInterfaces` (which share the card's `protocolVersion`).
fn interfaces(v: &Value) -> Vec<Interface> {
    let mut out = Vec::new();
    for i in v
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(url) = str_at(i, "url") {
            out.push(Interface {
                url: url.to_owned(),
                binding: str_at(i, "protocolBinding").unwrap_or("JSONRPC").to_owned(),
                version: str_at(i, "protocolVersion").unwrap_or("1.0").to_owned(),
            });
        }
    }
    let version = str_at(v, "protocolVersion").unwrap_or("0.3.0");
    if let Some(url) = str_at(v, "url") {
        out.push(Interface {
            url: url.to_owned(),
            binding: str_at(v, "preferredTransport")
                .unwrap_or("JSONRPC")
                .to_owned(),
            version: version.to_owned(),
        });
    }
    for i in v
        .get("additionalInterfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(url), Some(t)) = (str_at(i, "url"), str_at(i, "transport")) {
            let seen = out
                .iter()
                .any(|o| o.url == url && o.binding == t && o.version == version);
            if !seen {
                out.push(Interface {
                    url: url.to_owned(),
                    binding: t.to_owned(),
                    version: version.to_owned(),
                });
            }
        }
    }
    out
}

/// `securitySchemes` in either spelling.
fn schemes(v: &Value) -> Vec<Scheme> {
    let Some(map) = v.get("securitySchemes").and_then(Value::as_object) else {
        return Vec::new();
    };
    map.iter()
        .map(|(name, s)| Scheme {
            name: name.clone(),
            kind: scheme_kind(s),
        })
        .collect()
}

fn scheme_kind(s: &Value) -> SchemeKind {
    let (http, api_key) = match (
        s.get("httpAuthSecurityScheme"),
        s.get("apiKeySecurityScheme"),
    ) {
        (Some(h), _) => (Some(h), None),
        (_, Some(k)) => (None, Some((k, str_at(k, "location")))),
        _ => match str_at(s, "type") {
            Some("http") => (Some(s), None),
            Some("apiKey") => (None, Some((s, str_at(s, "in")))),
            other => {
                let what = other.map_or_else(|| first_key(s), str::to_owned);
                return SchemeKind::Unsupported { what };
            }
        },
    };
    if let Some(h) = http {
        return match str_at(h, "scheme") {
            Some(b) if b.eq_ignore_ascii_case("bearer") => SchemeKind::Bearer,
            other => SchemeKind::Unsupported {
                what: format!("http {}", other.unwrap_or("?")),
            },
        };
    }
    match api_key {
        Some((k, Some("header"))) => match str_at(k, "name") {
            Some(header) => SchemeKind::ApiKey {
                header: header.to_owned(),
            },
            None => SchemeKind::Unsupported {
                what: "apiKey without a name".into(),
            },
        },
        Some((_, location)) => SchemeKind::Unsupported {
            what: format!("apiKey in {}", location.unwrap_or("?")),
        },
        None => SchemeKind::Unsupported { what: first_key(s) },
    }
}

fn first_key(s: &Value) -> String {
    s.as_object()
        .and_then(|o| o.keys().next().cloned())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_1_0_card_is_read_and_chosen_over_0_3() {
        let v = json!({
            "name": "sim", "version": "1.2.3",
            "supportedInterfaces": [
                {"url": "http://h/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "url": "http://h/a2a", "protocolVersion": "0.3.0",
            "capabilities": {"streaming": true, "extensions": [{"uri": "cap-protocol/v1", "required": true}]},
            "skills": [{"id": "code", "name": "Coding"}],
            "securitySchemes": {
                "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
                "key": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "oauth": {"oauth2SecurityScheme": {"flows": {}}}
            }
        });
        let card = Card::parse("http://h/.well-known/agent-card.json", &v).unwrap();
        assert_eq!(
            (card.name.as_str(), card.version.as_str()),
            ("sim", "1.2.3")
        );
        assert_eq!(card.skills, ["Coding"]);
        assert!(card.has_cap_extension());
        let choice = card.choose().unwrap();
        assert_eq!(choice.spelling, Spelling::V1);
        assert_eq!(choice.endpoint, "http://h/a2a/v1");
        assert_eq!(card.schemes[0].kind, SchemeKind::Bearer);
        assert_eq!(
            card.schemes[1].kind,
            SchemeKind::ApiKey {
                header: "X-API-Key".into()
            }
        );
        assert!(matches!(
            card.schemes[2].kind,
            SchemeKind::Unsupported { .. }
        ));
    }

    #[test]
    fn a_0_3_card_without_the_extension_is_refused_naming_url_and_extension() {
        let v = json!({"name": "plain", "url": "http://h/", "protocolVersion": "0.3.0"});
        let card = Card::parse("http://h/.well-known/agent-card.json", &v).unwrap();
        assert_eq!(card.choose().unwrap().spelling, Spelling::V03);
        let err = card.check_extension(false).unwrap_err().to_string();
        assert!(
            err.contains("http://h/.well-known/agent-card.json"),
            "{err}"
        );
        assert!(err.contains("cap-protocol/v1"), "{err}");
        assert!(card.check_extension(true).is_ok());
    }

    #[test]
    fn a_card_without_json_rpc_is_refused() {
        let v = json!({"name": "g", "url": "h:1", "preferredTransport": "GRPC"});
        let err = Card::parse("u", &v).unwrap().choose().unwrap_err();
        assert!(matches!(err, CardError::NoJsonRpc { .. }), "{err}");
    }
}

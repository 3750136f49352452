//! Auth for an A2A peer (issue 14 point 5): the card's security schemes say how a
//! secret is sent (a bearer token, an API key header); the secret comes from the
//! environment variable `[x-a2a] secret_env` names, never from the manifest (a
//! variable the application withholds from agents, [`crate::process::environ`], is
//! unset for it too). The header is marked sensitive and no log, event or error shows its value.

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use super::error::A2aError;
use crate::bindings::a2a::{Card, SchemeKind};

/// How each request authenticates.
#[derive(Clone)]
pub(crate) struct Auth {
    scheme: String,
    env: String,
    header: HeaderName,
    value: HeaderValue,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Auth {
    /// The auth for `card` with the secret in `$env`: the card's first scheme this
    /// driver can send. `None` when no variable is named or the card has no scheme.
    pub(crate) fn for_card(
        card: &Card,
        env: Option<&str>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Auth>, A2aError> {
        let Some(env) = env else {
            return Ok(None);
        };
        let Some(secret) = lookup(env) else {
            return Err(A2aError::Client(format!(
                "[x-a2a] secret_env names ${env}, which is not set"
            )));
        };
        let usable = card.schemes.iter().find_map(|s| match &s.kind {
            SchemeKind::Bearer => Some((s.name.clone(), AUTHORIZATION, format!("Bearer {secret}"))),
            SchemeKind::ApiKey { header } => HeaderName::from_bytes(header.as_bytes())
                .ok()
                .map(|h| (s.name.clone(), h, secret.clone())),
            SchemeKind::Unsupported { .. } => None,
        });
        // A card naming no scheme still gets the secret as a bearer token.
        let (scheme, header, value) = match usable {
            Some(found) => found,
            None if card.schemes.is_empty() => (
                "bearer".to_owned(),
                AUTHORIZATION,
                format!("Bearer {secret}"),
            ),
            None => {
                let names: Vec<String> = card.schemes.iter().map(|s| s.name.clone()).collect();
                return Err(A2aError::Client(format!(
                    "agent card {} offers no scheme this driver can send (bearer, API key header): {}",
                    card.card_url,
                    names.join(", ")
                )));
            }
        };
        let mut value = HeaderValue::from_str(&value).map_err(|_| {
            A2aError::Client(format!("${env} holds characters a header cannot carry"))
        })?;
        value.set_sensitive(true);
        Ok(Some(Auth {
            scheme,
            env: env.to_owned(),
            header,
            value,
        }))
    }

    pub(crate) fn apply(&self, headers: &mut HeaderMap) {
        headers.insert(self.header.clone(), self.value.clone());
    }

    /// The scheme, header and variable — never the secret.
    pub(crate) fn describe(&self) -> String {
        format!(
            "`{}` via the {} header from ${}",
            self.scheme, self.header, self.env
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_secret_goes_into_the_schemes_header_and_never_into_its_description() {
        let card = Card::parse(
            "u",
            &json!({"name": "n", "securitySchemes": {
            "key": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}}),
        )
        .unwrap();
        let auth = Auth::for_card(&card, Some("TOKEN"), |_| Some("s3cret".into()))
            .unwrap()
            .unwrap();
        let mut h = HeaderMap::new();
        auth.apply(&mut h);
        assert_eq!(h["x-api-key"], "s3cret");
        assert!(h["x-api-key"].is_sensitive());
        assert!(!auth.describe().contains("s3cret"));
        assert!(!format!("{auth:?}").contains("s3cret"));
        assert!(Auth::for_card(&card, Some("UNSET"), |_| None).is_err());
        assert!(Auth::for_card(&card, None, |_| None).unwrap().is_none());
    }
}

//! `GET /openapi.json`: the API described, generated — never written by hand. Each
//! handler carries its `#[utoipa::path]` (method, path, parameters, bodies,
//! responses) and is registered with `utoipa_axum::routes!`, which gives the route
//! its path from the same attribute: a route and its description cannot part. What
//! every guarded route shares is added here from the code that enforces it: the
//! bearer scheme, the role [`Role::needed`] asks of each method and path (as
//! `x-capfleet-role` and in the description), and the `401`/`403` answers with their
//! [`ErrorBody`]. The probes and this document are open (`security: []`).

use std::sync::Arc;

use axum::Extension;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi as _};

use super::auth::Role;
use super::error::{ErrorBody, ErrorCode};
use super::schema::Finding;

/// The security scheme's name in the document.
pub(crate) const BEARER: &str = "bearer";
/// The operation extension naming the role a route needs.
pub(crate) const ROLE_EXTENSION: &str = "x-capfleet-role";

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "capfleet serve",
        description = "The headless server of capfleet: submit fleets, follow their journals, \
answer what their policy leaves open, read their artifacts. Every error is an `ErrorBody` \
with a stable `code`."
    ),
    components(schemas(ErrorBody, ErrorCode, Finding)),
    modifiers(&BearerScheme)
)]
struct ApiDoc;

struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, doc: &mut OpenApi) {
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "A token of `--token-file` (`capfleet serve token add NAME --role ROLE`). \
Roles: read (GET), run (+ submit, cancel), approve (+ answer asks), admin.",
            ))
            .build();
        doc.components
            .get_or_insert_with(Default::default)
            .add_security_scheme(BEARER, SecurityScheme::Http(scheme));
    }
}

/// The document's root (info, shared schemas, the bearer scheme), for the routes to
/// add their paths to.
pub(crate) fn root() -> OpenApi {
    ApiDoc::openapi()
}

/// The guarded routes' operations get the bearer requirement, their role and the
/// answers of a refused token.
pub(crate) fn guard(doc: &mut OpenApi) {
    for (path, item) in &mut doc.paths.paths {
        for (method, op) in operations(item) {
            let role = Role::needed(&method, path);
            op.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
            op.extensions
                .get_or_insert_with(Default::default)
                .insert(ROLE_EXTENSION.into(), role.as_str().into());
            let said = op.description.take().unwrap_or_default();
            op.description = Some(
                format!(
                    "{said}\n\nNeeds a token with the `{}` role or a higher one.",
                    role.as_str()
                )
                .trim_start()
                .to_owned(),
            );
            refused(
                op,
                StatusCode::UNAUTHORIZED,
                "No token, or a wrong one (nothing about the run is said).",
            );
            if role > Role::Read {
                refused(op, StatusCode::FORBIDDEN, "The token's role is too low.");
            }
        }
    }
}

/// The open routes say so (an empty requirement).
pub(crate) fn open(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for (_, op) in operations(item) {
            op.security = Some(vec![SecurityRequirement::default()]);
        }
    }
}

/// Every operation of a path, with its method.
fn operations(item: &mut PathItem) -> impl Iterator<Item = (Method, &mut Operation)> {
    [
        (Method::GET, item.get.as_mut()),
        (Method::POST, item.post.as_mut()),
        (Method::PUT, item.put.as_mut()),
        (Method::DELETE, item.delete.as_mut()),
        (Method::PATCH, item.patch.as_mut()),
        (Method::HEAD, item.head.as_mut()),
        (Method::OPTIONS, item.options.as_mut()),
        (Method::TRACE, item.trace.as_mut()),
    ]
    .into_iter()
    .filter_map(|(m, op)| op.map(|op| (m, op)))
}

/// An error answer with the [`ErrorBody`] schema, unless the operation says it already.
pub(crate) fn refused(op: &mut Operation, status: StatusCode, description: &str) {
    let body = ContentBuilder::new()
        .schema(Some(RefOr::Ref(Ref::from_schema_name("ErrorBody"))))
        .build();
    let response = ResponseBuilder::new()
        .description(description)
        .content("application/json", body)
        .build();
    op.responses
        .responses
        .entry(status.as_u16().to_string())
        .or_insert(RefOr::T(response));
}

/// The document, as served.
pub(crate) fn json(doc: &OpenApi) -> Arc<str> {
    match doc.to_json() {
        Ok(j) => j.into(),
        // Only a map with non-string keys fails to encode; the document has none.
        Err(e) => format!(r#"{{"openapi":"3.1.0","error":"{e}"}}"#).into(),
    }
}

/// The API's OpenAPI 3.1 document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "server",
    operation_id = "openapi",
    responses((status = 200, description = "This document", content_type = "application/json", body = Object))
)]
pub(crate) async fn openapi(Extension(doc): Extension<Arc<str>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        doc.to_string(),
    )
        .into_response()
}

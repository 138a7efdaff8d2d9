//! The HTTP API: routes Kubernetes paths to the store, speaks JSON (and YAML for
//! server-side apply), answers errors as `Status` objects, and streams watches.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::admission;
use crate::apply;
use crate::discovery;
use crate::error::{ApiError, Result};
use crate::patch;
use crate::request_log::{self, RequestLog};
use crate::resources::ResourceType;
use crate::selectors::Selectors;
use crate::store::{meta, Change, Part, Store};

pub type Body = BoxBody<Bytes, Infallible>;

/// What every request handler shares.
#[derive(Debug, Clone)]
pub struct Shared {
    pub store: Arc<Mutex<Store>>,
    /// Who asked for what (`request_log.rs`).
    pub requests: Arc<RequestLog>,
}

impl Shared {
    pub fn new(store: Store) -> Self {
        Self {
            store: Arc::new(Mutex::new(store)),
            requests: Arc::new(RequestLog::default()),
        }
    }

    /// Runs `f` with the store locked.
    pub fn with<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        let mut store = self
            .store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut store)
    }
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    let mut response = Response::new(full(serde_json::to_vec(body).unwrap_or_default()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn error_response(error: &ApiError) -> Response<Body> {
    json_response(
        StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &error.to_status(),
    )
}

/// A resource path, parsed.
#[derive(Debug)]
struct Target {
    rt: &'static ResourceType,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

enum Route {
    Json(Value),
    Resource(Target),
    NotFound,
}

fn route(path: &str) -> Route {
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    match parts.as_slice() {
        ["version"] => return Route::Json(discovery::version()),
        ["api"] => return Route::Json(discovery::core_versions()),
        ["apis"] => return Route::Json(discovery::groups()),
        ["healthz"] | ["readyz"] | ["livez"] => return Route::Json(json!("ok")),
        ["openapi", "v3"] => return Route::Json(discovery::openapi_root()),
        ["openapi", "v3", rest @ ..] => {
            return discovery::openapi_group_version(&rest.join("/"))
                .map_or(Route::NotFound, Route::Json)
        }
        ["api", "v1"] => {
            return discovery::resources("", "v1").map_or(Route::NotFound, Route::Json)
        }
        ["apis", group] => return discovery::group(group).map_or(Route::NotFound, Route::Json),
        ["apis", group, version] => {
            return discovery::resources(group, version).map_or(Route::NotFound, Route::Json)
        }
        _ => {}
    }
    let (group, version, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Route::NotFound,
    };
    // namespaces/{ns}/{plural}/... unless it is the namespace itself (or its status).
    // `namespaces/{ns}/{plural}/...`, except a namespace's own subresources.
    let (namespace, rest) = match rest {
        ["namespaces", _, "status" | "finalize", ..] if group.is_empty() => (None, rest.to_vec()),
        ["namespaces", ns, plural, tail @ ..] => {
            let mut rest = vec![*plural];
            rest.extend_from_slice(tail);
            (Some((*ns).to_owned()), rest)
        }
        other => (None, other.to_vec()),
    };
    let Some((plural, tail)) = rest.split_first() else {
        return Route::NotFound;
    };
    let Some(rt) = ResourceType::find(group, version, plural) else {
        return Route::NotFound;
    };
    if rt.namespaced != namespace.is_some() && !(rt.namespaced && tail.is_empty()) {
        return Route::NotFound;
    }
    match tail {
        [] => Route::Resource(Target {
            rt,
            namespace,
            name: None,
            subresource: None,
        }),
        [name] => Route::Resource(Target {
            rt,
            namespace,
            name: Some((*name).to_owned()),
            subresource: None,
        }),
        [name, sub] if (*sub == "status" && rt.status) || (*sub == "scale" && rt.scale) => {
            Route::Resource(Target {
                rt,
                namespace,
                name: Some((*name).to_owned()),
                subresource: Some((*sub).to_owned()),
            })
        }
        _ => Route::NotFound,
    }
}

fn query(request: &Request<Incoming>) -> HashMap<String, String> {
    let query = request.uri().query().unwrap_or_default();
    form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

/// Parses a request body: JSON, or (for apply) YAML.
fn parse_body(bytes: &[u8], yaml: bool) -> Result<Value> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(json_error) if yaml => serde_yaml_ng::from_slice(bytes).map_err(|e| {
            ApiError::bad_request(format!(
                "the body is neither JSON ({json_error}) nor YAML ({e})"
            ))
        }),
        Err(e) => Err(ApiError::bad_request(format!("the body is not JSON: {e}"))),
    }
}

/// Handles one request.
pub async fn handle(
    shared: Shared,
    request: Request<Incoming>,
) -> std::result::Result<Response<Body>, Infallible> {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    if path == "/_emulator/requests" && method == Method::GET {
        let params = query(&request);
        let user = params.get("user").map_or("", String::as_str);
        return Ok(json_response(
            StatusCode::OK,
            &json!(shared.requests.of(user)),
        ));
    }
    let user = request_log::user(
        request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
    );
    let response = match route(&path) {
        Route::Json(body) if method == Method::GET => json_response(StatusCode::OK, &body),
        Route::Json(_) => error_response(&ApiError::method_not_allowed(format!(
            "{method} is not allowed on {path}"
        ))),
        Route::NotFound => error_response(&ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("the server could not find the requested resource ({path})"),
            details: None,
        }),
        Route::Resource(target) => {
            let params = query(&request);
            let content_type = request
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_owned();
            let watch = matches!(params.get("watch").map(String::as_str), Some("true" | "1"));
            let asked = request_log::Entry {
                user,
                verb: request_log::verb(&method, target.name.is_some(), watch),
                group: target.rt.group.to_owned(),
                resource: match &target.subresource {
                    Some(sub) => format!("{}/{sub}", target.rt.plural),
                    None => target.rt.plural.to_owned(),
                },
                namespace: target.namespace.clone(),
                name: target.name.clone(),
            };
            shared.requests.record(asked.clone());
            if method == Method::GET && target.name.is_none() && watch {
                return Ok(match start_watch(&shared, &target, &params) {
                    Ok(response) => response,
                    Err(error) => error_response(&error),
                });
            }
            let body = match request.into_body().collect().await {
                Ok(body) => body.to_bytes(),
                Err(e) => {
                    return Ok(error_response(&ApiError::bad_request(format!(
                        "reading the body: {e}"
                    ))))
                }
            };
            let outcome = serve(&shared, &method, &target, &params, &content_type, &body);
            // An apply (or update) that creates its object is authorised for `create`
            // too, as the API server does (handlers/patch.go, update.go).
            if matches!(outcome, Ok((StatusCode::CREATED, _))) && asked.verb != "create" {
                shared.requests.record(request_log::Entry {
                    verb: "create",
                    ..asked
                });
            }
            match outcome {
                Ok((status, body)) => json_response(status, &body),
                Err(error) => error_response(&error),
            }
        }
    };
    Ok(response)
}

fn manager(params: &HashMap<String, String>, fallback: &str) -> String {
    params
        .get("fieldManager")
        .cloned()
        .unwrap_or_else(|| fallback.to_owned())
}

fn scale_of(object: &Value) -> Value {
    let metadata = meta(object);
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": metadata.get("name"), "namespace": metadata.get("namespace"),
            "uid": metadata.get("uid"), "resourceVersion": metadata.get("resourceVersion"),
            "creationTimestamp": metadata.get("creationTimestamp"),
        },
        "spec": {"replicas": object.pointer("/spec/replicas").cloned().unwrap_or(json!(0))},
        "status": {"replicas": object.pointer("/status/replicas").cloned().unwrap_or(json!(0))},
    })
}

fn serve(
    shared: &Shared,
    method: &Method,
    target: &Target,
    params: &HashMap<String, String>,
    content_type: &str,
    body: &[u8],
) -> Result<(StatusCode, Value)> {
    let rt = target.rt;
    let ns = target.namespace.as_deref();
    let api_version = rt.api_version();
    let directive = admission::field_validation(params)?;
    shared.with(|store| {
        match (
            method,
            target.name.as_deref(),
            target.subresource.as_deref(),
        ) {
            (&Method::GET, None, None) => {
                let selectors = Selectors::parse(
                    params.get("labelSelector").map(String::as_str),
                    params.get("fieldSelector").map(String::as_str),
                )?;
                let items = store.list(rt, ns, &selectors);
                Ok((
                    StatusCode::OK,
                    json!({
                        "kind": format!("{}List", rt.kind), "apiVersion": api_version,
                        "metadata": {"resourceVersion": store.resource_version().to_string()},
                        "items": items,
                    }),
                ))
            }
            (&Method::GET, Some(name), Some("scale")) => {
                Ok((StatusCode::OK, scale_of(&store.get(rt, ns, name)?)))
            }
            (&Method::GET, Some(name), _) => Ok((StatusCode::OK, store.get(rt, ns, name)?)),
            (&Method::POST, None, None) => {
                let mut object = parse_body(body, false)?;
                let manager = manager(params, "unknown");
                admission::admit(rt, &directive, &mut object, None)?;
                apply::record_update(None, &mut object, &manager, "", &api_version);
                Ok((StatusCode::CREATED, store.create(rt, ns, object)?))
            }
            (&Method::PUT, Some(name), sub) => {
                let mut object = parse_body(body, false)?;
                let current = store.get(rt, ns, name)?;
                if sub == Some("scale") {
                    let replicas = object
                        .pointer("/spec/replicas")
                        .cloned()
                        .unwrap_or(json!(0));
                    let mut next = current.clone();
                    next["spec"]["replicas"] = replicas;
                    apply::record_update(
                        Some(&current),
                        &mut next,
                        &manager(params, "unknown"),
                        "",
                        &api_version,
                    );
                    let updated = store.update(rt, ns, name, next, Part::Main)?;
                    return Ok((StatusCode::OK, scale_of(&updated)));
                }
                let part = if sub == Some("status") {
                    Part::Status
                } else {
                    Part::Main
                };
                let subresource = sub.unwrap_or_default();
                if part == Part::Main {
                    admission::admit(rt, &directive, &mut object, Some(&current))?;
                }
                apply::record_update(
                    Some(&current),
                    &mut object,
                    &manager(params, "unknown"),
                    subresource,
                    &api_version,
                );
                if part == Part::Status {
                    // managedFields of a status write live in the main metadata.
                    let fields = object.pointer("/metadata/managedFields").cloned();
                    let mut merged = current.clone();
                    merged["status"] = object.get("status").cloned().unwrap_or(Value::Null);
                    let updated = store.update(rt, ns, name, merged, Part::Status)?;
                    return Ok((
                        StatusCode::OK,
                        with_fields(store, rt, ns, name, updated, fields)?,
                    ));
                }
                Ok((StatusCode::OK, store.update(rt, ns, name, object, part)?))
            }
            (&Method::PATCH, Some(name), sub) => {
                let kind = content_type.split(';').next().unwrap_or_default().trim();
                let current = store.get(rt, ns, name);
                let subresource = sub.unwrap_or_default();
                if kind == "application/apply-patch+yaml" {
                    let config = parse_body(body, true)?;
                    let Some(manager) = params.get("fieldManager") else {
                        return Err(ApiError::bad_request(
                            "fieldManager is required for apply patch",
                        ));
                    };
                    let force = params.get("force").is_some_and(|f| f == "true");
                    let current = match current {
                        Ok(current) => Some(current),
                        Err(e) if e.code == 404 && sub.is_none() => None,
                        Err(e) => return Err(e),
                    };
                    let mut next = apply::apply(
                        current.as_ref(),
                        &config,
                        manager,
                        force,
                        subresource,
                        &api_version,
                    )?;
                    if sub.is_none() {
                        admission::admit(rt, &directive, &mut next, current.as_ref())?;
                    }
                    return match current {
                        None => Ok((StatusCode::CREATED, store.create(rt, ns, next)?)),
                        Some(_) => write(store, rt, ns, name, sub, next),
                    };
                }
                let current = current?;
                let base = if sub == Some("scale") {
                    scale_of(&current)
                } else {
                    current.clone()
                };
                let patch = parse_body(body, false)?;
                let mut next = match kind {
                    "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                        let mut next = base;
                        patch::merge(&mut next, &patch);
                        next
                    }
                    "application/json-patch+json" => patch::json_patch(&base, &patch)?,
                    other => {
                        return Err(ApiError::unsupported_media_type(format!(
                            "the patch type {other:?} is not supported"
                        )))
                    }
                };
                if sub == Some("scale") {
                    let mut scaled = current.clone();
                    scaled["spec"]["replicas"] =
                        next.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
                    next = scaled;
                }
                if sub.is_none() {
                    admission::admit(rt, &directive, &mut next, Some(&current))?;
                }
                let fields_sub = if sub == Some("status") { "status" } else { "" };
                apply::record_update(
                    Some(&current),
                    &mut next,
                    &manager(params, "unknown"),
                    fields_sub,
                    &api_version,
                );
                write(store, rt, ns, name, sub, next)
            }
            (&Method::DELETE, Some(name), None) => {
                let (object, gone) = store.delete(rt, ns, name)?;
                Ok((
                    if gone {
                        StatusCode::OK
                    } else {
                        StatusCode::ACCEPTED
                    },
                    object,
                ))
            }
            _ => Err(ApiError::method_not_allowed(format!(
                "{method} is not supported here"
            ))),
        }
    })
}

/// Writes a patched object through the part its subresource names.
fn write(
    store: &mut Store,
    rt: &ResourceType,
    ns: Option<&str>,
    name: &str,
    sub: Option<&str>,
    mut next: Value,
) -> Result<(StatusCode, Value)> {
    // A patch never carries a stale resourceVersion of its own making.
    if let Some(m) = next.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    match sub {
        Some("status") => {
            let fields = next.pointer("/metadata/managedFields").cloned();
            let updated = store.update(rt, ns, name, next, Part::Status)?;
            Ok((
                StatusCode::OK,
                with_fields(store, rt, ns, name, updated, fields)?,
            ))
        }
        Some("scale") => Ok((
            StatusCode::OK,
            scale_of(&store.update(rt, ns, name, next, Part::Main)?),
        )),
        _ => Ok((
            StatusCode::OK,
            store.update(rt, ns, name, next, Part::Main)?,
        )),
    }
}

/// A status write keeps metadata as it was; its managedFields still change.
fn with_fields(
    store: &mut Store,
    rt: &ResourceType,
    ns: Option<&str>,
    name: &str,
    updated: Value,
    fields: Option<Value>,
) -> Result<Value> {
    let Some(fields) = fields else {
        return Ok(updated);
    };
    if updated.pointer("/metadata/managedFields") == Some(&fields) {
        return Ok(updated);
    }
    let mut next = updated;
    next["metadata"]["managedFields"] = fields;
    if let Some(m) = next.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    store.update(rt, ns, name, next, Part::Main)
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// Starts a watch: the current objects as ADDED when no resourceVersion (or `0`) is
/// given, else the changes after it (`410` as an ERROR event when they are no longer
/// kept), then changes as they happen, until `timeoutSeconds`.
fn start_watch(
    shared: &Shared,
    target: &Target,
    params: &HashMap<String, String>,
) -> Result<Response<Body>> {
    let selectors = Selectors::parse(
        params.get("labelSelector").map(String::as_str),
        params.get("fieldSelector").map(String::as_str),
    )?;
    let from: u64 = match params.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => 0,
        Some(rv) => rv
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?,
    };
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let bookmarks = params
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true");
    let rt = target.rt;
    let resource = rt.qualified();
    let namespace = target.namespace.clone();
    let matching = selectors.clone();
    let wanted = move |change: &Change| {
        change.key.resource == resource
            && namespace
                .as_ref()
                .is_none_or(|ns| &change.key.namespace == ns)
            && matching.matches(&change.object)
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    // Subscribed under the lock that also reads the backlog: no change falls between.
    let (mut changes, backlog, current_rv) = shared.with(|store| {
        let changes = store.subscribe();
        let backlog: Option<Vec<(&'static str, Value)>> = if from == 0 {
            Some(
                store
                    .list(rt, target.namespace.as_deref(), &selectors)
                    .into_iter()
                    .map(|object| ("ADDED", object))
                    .collect(),
            )
        } else {
            store.changes_since(from).map(|list| {
                list.into_iter()
                    .filter(|change| wanted(change))
                    .map(|c| (c.kind, c.object))
                    .collect()
            })
        };
        (changes, backlog, store.resource_version())
    });
    let api_version = rt.api_version();
    let kind = rt.kind;
    tokio::spawn(async move {
        let Some(backlog) = backlog else {
            let gone = ApiError::gone(format!("too old resource version: {from} ({current_rv})"));
            let _ = tx.send(event_line("ERROR", &gone.to_status())).await;
            return;
        };
        for (event, object) in backlog {
            if tx.send(event_line(event, &object)).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut bookmark = tokio::time::interval(Duration::from_secs(5));
        let mut last_rv = current_rv;
        loop {
            tokio::select! {
                biased;
                () = &mut deadline => return,
                change = changes.recv() => match change {
                    Ok(change) => {
                        last_rv = change.resource_version;
                        if change.resource_version > current_rv && wanted(&change)
                            && tx.send(event_line(change.kind, &change.object)).await.is_err() {
                            return;
                        }
                    }
                    // Lagged or closed: end the watch; the client watches again.
                    Err(_) => return,
                },
                _ = bookmark.tick(), if bookmarks => {
                    let marker = json!({"kind": kind, "apiVersion": api_version,
                                        "metadata": {"resourceVersion": last_rv.to_string()}});
                    if tx.send(event_line("BOOKMARK", &marker)).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(Frame::data(bytes)), rx))
    });
    let mut response = Response::new(StreamBody::new(stream).boxed());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

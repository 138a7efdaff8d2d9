//! The objects, in memory: create, read, update and delete with the metadata a real API
//! server keeps (uid, creationTimestamp, a cluster-wide increasing resourceVersion,
//! generation bumped on spec changes only), finalizers with deletionTimestamp, namespace
//! deletion that cascades, and the event log watches read from.
//!
//! The store is synchronous and behind one lock: a request's check and write happen
//! together, as they would in etcd's transaction.

use std::collections::{BTreeMap, VecDeque};

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tokio::sync::broadcast;

use crate::error::{ApiError, Result};
use crate::resources::{ResourceType, ALL, NAMESPACES};
use crate::selectors::Selectors;

/// How many changes the event log keeps by default: a watch from an older
/// resourceVersion gets `410 Gone` and relists.
pub const EVENT_LOG: usize = 10_000;

/// Where an object lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Key {
    /// `ResourceType::qualified()`.
    pub resource: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
}

impl Key {
    pub fn new(rt: &ResourceType, namespace: Option<&str>, name: &str) -> Self {
        Self {
            resource: rt.qualified(),
            namespace: namespace.unwrap_or_default().to_owned(),
            name: name.to_owned(),
        }
    }
}

/// One change, as a watch reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: &'static str,
    pub key: Key,
    pub object: Value,
    pub resource_version: u64,
}

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Everything but `status` (where the type has a status subresource).
    Main,
    /// `status` only.
    Status,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Snapshot {
    resource_version: u64,
    objects: Vec<(Key, Value)>,
}

#[derive(Debug)]
pub struct Store {
    objects: BTreeMap<Key, Value>,
    resource_version: u64,
    log: VecDeque<Change>,
    log_capacity: usize,
    changes: broadcast::Sender<Change>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn uid() -> String {
    let bytes: [u8; 16] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// The object without `metadata` and `status`: what `generation` counts changes of.
fn spec_part(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
    }
    copy
}

pub fn meta(object: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    object
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

fn meta_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    object["metadata"]
        .as_object_mut()
        .expect("metadata was just made an object")
}

fn finalizers(object: &Value) -> usize {
    meta(object)
        .get("finalizers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

/// The value at a dotted path.
pub fn at<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(object, |value, part| value.get(part))
}

impl Store {
    pub fn new() -> Self {
        let (changes, _) = broadcast::channel(1024);
        Self {
            objects: BTreeMap::new(),
            resource_version: 0,
            log: VecDeque::new(),
            log_capacity: EVENT_LOG,
            changes,
        }
    }

    /// Keeps at most `capacity` changes for watches to resume from.
    pub fn with_log_capacity(mut self, capacity: usize) -> Self {
        self.log_capacity = capacity.max(1);
        self
    }

    /// The namespaces every cluster has, in a store that has none yet.
    pub fn bootstrap(&mut self) {
        if self.objects.is_empty() {
            for name in ["default", "kube-system", "kube-public"] {
                let _ = self.create(&NAMESPACES, None, json!({"metadata": {"name": name}}));
            }
        }
    }

    /// The store as a file's bytes (JSON).
    pub fn snapshot(&self) -> Vec<u8> {
        let snapshot = Snapshot {
            resource_version: self.resource_version,
            objects: self
                .objects
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        };
        serde_json::to_vec(&snapshot).unwrap_or_default()
    }

    /// A store from [`snapshot`](Self::snapshot) bytes.
    pub fn restore(bytes: &[u8]) -> anyhow::Result<Self> {
        let snapshot: Snapshot = serde_json::from_slice(bytes)?;
        let mut store = Self::new();
        store.resource_version = snapshot.resource_version;
        store.objects = snapshot.objects.into_iter().collect();
        Ok(store)
    }

    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// The changes after `resource_version`, or `None` when the log no longer reaches
    /// back that far.
    pub fn changes_since(&self, resource_version: u64) -> Option<Vec<Change>> {
        if resource_version >= self.resource_version {
            return Some(Vec::new());
        }
        let oldest = self.log.front().map(|c| c.resource_version)?;
        if resource_version + 1 < oldest {
            return None;
        }
        Some(
            self.log
                .iter()
                .filter(|c| c.resource_version > resource_version)
                .cloned()
                .collect(),
        )
    }

    fn next_version(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    fn record(&mut self, kind: &'static str, key: &Key, object: &Value) {
        let change = Change {
            kind,
            key: key.clone(),
            object: object.clone(),
            resource_version: self.resource_version,
        };
        if self.log.len() >= self.log_capacity {
            self.log.pop_front();
        }
        self.log.push_back(change.clone());
        let _ = self.changes.send(change);
    }

    pub fn get(&self, rt: &ResourceType, namespace: Option<&str>, name: &str) -> Result<Value> {
        self.objects
            .get(&Key::new(rt, namespace, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.qualified(), name))
    }

    /// Objects of the type in `namespace` (all namespaces when `None`) that match.
    pub fn list(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        selectors: &Selectors,
    ) -> Vec<Value> {
        let resource = rt.qualified();
        self.objects
            .iter()
            .filter(|(key, _)| key.resource == resource)
            .filter(|(key, _)| namespace.is_none_or(|ns| key.namespace == ns))
            .filter(|(_, object)| selectors.matches(object))
            .map(|(_, object)| object.clone())
            .collect()
    }

    fn check_namespace(&self, rt: &ResourceType, namespace: Option<&str>) -> Result<()> {
        if !rt.namespaced {
            return Ok(());
        }
        let namespace =
            namespace.ok_or_else(|| ApiError::bad_request("a namespace is required"))?;
        let ns = self.get(&NAMESPACES, None, namespace)?;
        if meta(&ns).contains_key("deletionTimestamp") {
            return Err(ApiError::forbidden(format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            )));
        }
        Ok(())
    }

    /// Creates `object`; `AlreadyExists` when the name is taken.
    pub fn create(
        &mut self,
        rt: &ResourceType,
        namespace: Option<&str>,
        mut object: Value,
    ) -> Result<Value> {
        if !object.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        let metadata = meta_mut(&mut object);
        let name = match metadata.get("name").and_then(Value::as_str) {
            Some(name) if !name.is_empty() => name.to_owned(),
            _ => match metadata.get("generateName").and_then(Value::as_str) {
                Some(prefix) => {
                    let suffix: String = (0..5)
                        .map(|_| char::from(b'a' + rand::random::<u8>() % 26))
                        .collect();
                    format!("{prefix}{suffix}")
                }
                None => {
                    return Err(ApiError::invalid(
                        rt,
                        "",
                        &["metadata.name: Required value".into()],
                    ))
                }
            },
        };
        validate_name(rt, &name)?;
        if let (Some(body_ns), Some(ns)) =
            (metadata.get("namespace").and_then(Value::as_str), namespace)
        {
            if body_ns != ns {
                return Err(ApiError::bad_request(format!(
                    "the namespace of the object ({body_ns}) does not match the namespace of the request ({ns})"
                )));
            }
        }
        self.check_namespace(rt, namespace)?;
        let key = Key::new(rt, namespace, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(&rt.qualified(), &name));
        }
        if rt.status && rt.kind != "Namespace" {
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
        }
        if rt.kind == "Namespace" {
            object["status"] = json!({"phase": "Active"});
        }
        let version = self.next_version();
        object["apiVersion"] = json!(rt.api_version());
        object["kind"] = json!(rt.kind);
        let metadata = meta_mut(&mut object);
        metadata.insert("name".into(), json!(name));
        if rt.namespaced {
            metadata.insert("namespace".into(), json!(namespace));
        } else {
            metadata.remove("namespace");
        }
        metadata.insert("uid".into(), json!(uid()));
        metadata.insert("creationTimestamp".into(), json!(now()));
        metadata.insert("resourceVersion".into(), json!(version.to_string()));
        metadata.insert("generation".into(), json!(1));
        metadata.remove("deletionTimestamp");
        self.objects.insert(key.clone(), object.clone());
        self.record("ADDED", &key, &object);
        Ok(object)
    }

    /// Replaces the object's `part` with `object`'s. A resourceVersion in `object` must
    /// be the current one (`Conflict` otherwise); none means "whatever is there".
    pub fn update(
        &mut self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        mut object: Value,
        part: Part,
    ) -> Result<Value> {
        let key = Key::new(rt, namespace, name);
        let current = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.qualified(), name))?;
        if !object.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        let current_meta = meta(&current).clone();
        if let Some(given) = meta(&object).get("resourceVersion").and_then(Value::as_str) {
            if Some(given) != current_meta.get("resourceVersion").and_then(Value::as_str) {
                return Err(ApiError::conflict(format!(
                    "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                    rt.qualified()
                )));
            }
        }
        if let Some(body_name) = meta(&object).get("name").and_then(Value::as_str) {
            if body_name != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({body_name}) does not match the name in the URL ({name})"
                )));
            }
        }
        let mut next = match part {
            Part::Main => {
                if rt.status {
                    match current.get("status") {
                        Some(status) => object["status"] = status.clone(),
                        None => {
                            if let Some(map) = object.as_object_mut() {
                                map.remove("status");
                            }
                        }
                    }
                }
                object
            }
            Part::Status => {
                let mut next = current.clone();
                match object.get("status") {
                    Some(status) => next["status"] = status.clone(),
                    None => {
                        if let Some(map) = next.as_object_mut() {
                            map.remove("status");
                        }
                    }
                }
                next
            }
        };
        // What the server owns stays the server's.
        let metadata = meta_mut(&mut next);
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "namespace",
            "name",
        ] {
            match current_meta.get(field) {
                Some(value) => metadata.insert(field.into(), value.clone()),
                None => metadata.remove(field),
            };
        }
        if part == Part::Status {
            // Status writes change nothing else in metadata either.
            *metadata = current_meta.clone();
        }
        if current_meta.contains_key("deletionTimestamp")
            && finalizers(&next) > finalizers(&current)
        {
            return Err(ApiError::forbidden(
                "no new finalizers can be added if the object is being deleted",
            ));
        }
        next["apiVersion"] = json!(rt.api_version());
        next["kind"] = json!(rt.kind);
        let generation = current_meta
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let generation = if part == Part::Main && spec_part(&next) != spec_part(&current) {
            generation + 1
        } else {
            generation
        };
        meta_mut(&mut next).insert("generation".into(), json!(generation));
        if next == current {
            return Ok(current); // nothing changed: no new resourceVersion, no event
        }
        let version = self.next_version();
        meta_mut(&mut next).insert("resourceVersion".into(), json!(version.to_string()));
        if meta(&next).contains_key("deletionTimestamp") && finalizers(&next) == 0 {
            self.remove(&key);
            return Ok(next);
        }
        self.objects.insert(key.clone(), next.clone());
        self.record("MODIFIED", &key, &next);
        Ok(next)
    }

    /// Deletes the object: at once without finalizers (`Ok((object, true))`); with
    /// finalizers it gets a deletionTimestamp and stays until they are removed
    /// (`Ok((object, false))`). A namespace's objects are deleted with it.
    pub fn delete(
        &mut self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(Value, bool)> {
        let key = Key::new(rt, namespace, name);
        let mut object = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.qualified(), name))?;
        if rt.kind == "Namespace" {
            if !meta(&object).contains_key("deletionTimestamp") {
                let version = self.next_version();
                let metadata = meta_mut(&mut object);
                metadata.insert("deletionTimestamp".into(), json!(now()));
                metadata.insert("resourceVersion".into(), json!(version.to_string()));
                object["status"] = json!({"phase": "Terminating"});
                self.objects.insert(key.clone(), object.clone());
                self.record("MODIFIED", &key, &object);
            }
            let contents: Vec<Key> = self
                .objects
                .keys()
                .filter(|k| k.namespace == name)
                .cloned()
                .collect();
            for content in contents {
                if let Some(rt) = ALL.iter().find(|rt| rt.qualified() == content.resource) {
                    let _ = self.delete(rt, Some(name), &content.name);
                }
            }
            let gone = self.finish_namespace(name);
            return Ok((self.objects.get(&key).cloned().unwrap_or(object), gone));
        }
        if finalizers(&object) == 0 {
            self.remove(&key);
            if rt.namespaced {
                self.finish_namespace(namespace.unwrap_or_default());
            }
            return Ok((object, true));
        }
        if !meta(&object).contains_key("deletionTimestamp") {
            let version = self.next_version();
            let metadata = meta_mut(&mut object);
            metadata.insert("deletionTimestamp".into(), json!(now()));
            metadata.insert("resourceVersion".into(), json!(version.to_string()));
            self.objects.insert(key.clone(), object.clone());
            self.record("MODIFIED", &key, &object);
        }
        Ok((object, false))
    }

    fn remove(&mut self, key: &Key) {
        if let Some(mut object) = self.objects.remove(key) {
            let version = self.next_version();
            meta_mut(&mut object).insert("resourceVersion".into(), json!(version.to_string()));
            self.record("DELETED", key, &object);
            if !key.namespace.is_empty() {
                self.finish_namespace(&key.namespace.clone());
            }
        }
    }

    /// Removes a terminating namespace once it holds nothing; returns whether it is gone.
    fn finish_namespace(&mut self, namespace: &str) -> bool {
        let key = Key::new(&NAMESPACES, None, namespace);
        let Some(ns) = self.objects.get(&key) else {
            return true;
        };
        let terminating = meta(ns).contains_key("deletionTimestamp");
        let empty = !self.objects.keys().any(|k| k.namespace == namespace);
        if terminating && empty && finalizers(ns) == 0 {
            self.remove(&key);
            return true;
        }
        false
    }

    /// Every object of every type (for the operator's reconcile loop).
    pub fn all_of(&self, rt: &ResourceType) -> Vec<(Key, Value)> {
        let resource = rt.qualified();
        self.objects
            .iter()
            .filter(|(key, _)| key.resource == resource)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// DNS-1123: lower-case alphanumerics and `-` (and `.` for subdomain names), starting and
/// ending alphanumeric, at most 253 characters (63 for namespaces).
fn validate_name(rt: &ResourceType, name: &str) -> Result<()> {
    let max = if rt.kind == "Namespace" { 63 } else { 253 };
    let allowed = |c: char| {
        c.is_ascii_lowercase()
            || c.is_ascii_digit()
            || c == '-'
            || (c == '.' && rt.kind != "Namespace")
    };
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if name.len() > max
        || !name.chars().all(allowed)
        || !ends_ok(name.chars().next())
        || !ends_ok(name.chars().last())
    {
        return Err(ApiError::invalid(
            rt,
            name,
            &[format!(
                "metadata.name: Invalid value: \"{name}\": a lowercase RFC 1123 name must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
            )],
        ));
    }
    Ok(())
}

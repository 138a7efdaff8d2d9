//! A small structural-schema language (the OpenAPI subset HyperShift's CRDs use) and the
//! checker that applies one to a resource as kube-apiserver does for a custom resource:
//!
//! 1. prune: fields the schema does not declare are removed (and reported), and so are
//!    `null` values of fields without a default;
//! 2. default: a copy is given the schema defaults of absent fields;
//! 3. validate the copy: types, enums, lengths, patterns, bounds, sizes, required fields,
//!    list sets;
//! 4. evaluate the `x-kubernetes-validations` rules, unless step 3 found a type, enum,
//!    required, too-long or too-many error (the API server then skips every rule and says
//!    so).
//!
//! Messages are worded like kube-apiserver's field errors, paths included: schema errors
//! name list items `[i]` and map entries `.key`; rule errors `[i]` and `[key]`.

use serde_json::Value;

/// A rule over a node's value, standing for one CEL `x-kubernetes-validations` entry:
/// `Ok(false)` when the value breaks it, `Err` with CEL's runtime error (such as
/// `no such key: filters`) when evaluation fails.
pub(super) type ValueRule = fn(&Value) -> Result<bool, String>;
/// A rule or pattern over a string value.
pub(super) type TextRule = fn(&str) -> bool;

#[derive(Debug, Clone, Copy)]
pub(super) enum Check {
    Value(ValueRule),
    Text(TextRule),
}

/// One `x-kubernetes-validations` rule: its message and its meaning.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rule {
    pub(super) message: &'static str,
    pub(super) check: Check,
}

/// An OpenAPI `pattern`: the expression as the API server quotes it, and its matcher.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pattern {
    pub(super) text: &'static str,
    pub(super) test: TextRule,
}

#[derive(Debug)]
pub(super) enum Shape {
    String,
    /// An integer, with its OpenAPI format (`int32`, `int64`) if any.
    Integer(Option<&'static str>),
    Boolean,
    /// `x-kubernetes-int-or-string`.
    IntOrString,
    /// An object with declared properties; any other property is unknown.
    Object {
        fields: Vec<(&'static str, Node)>,
        required: &'static [&'static str],
    },
    /// An object of free keys (`additionalProperties`), each value of one schema.
    Map(Box<Node>),
    List(Box<Node>),
    /// An object whose content the emulator takes as it is: neither pruned nor checked
    /// (a sub-object modelled shallowly).
    Opaque,
    /// A field the emulator does not describe: any value of it is reported.
    Unmodelled,
}

/// A schema node.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) shape: Shape,
    pub(super) default: Option<Value>,
    pub(super) one_of: &'static [&'static str],
    pub(super) min_length: Option<usize>,
    pub(super) max_length: Option<usize>,
    pub(super) pattern: Option<Pattern>,
    pub(super) minimum: Option<i64>,
    pub(super) maximum: Option<i64>,
    pub(super) min_items: Option<usize>,
    pub(super) max_items: Option<usize>,
    /// `x-kubernetes-list-type: set`: no two items equal.
    pub(super) set: bool,
    pub(super) min_properties: Option<usize>,
    pub(super) max_properties: Option<usize>,
    pub(super) rules: Vec<Rule>,
}

fn node(shape: Shape) -> Node {
    Node {
        shape,
        default: None,
        one_of: &[],
        min_length: None,
        max_length: None,
        pattern: None,
        minimum: None,
        maximum: None,
        min_items: None,
        max_items: None,
        set: false,
        min_properties: None,
        max_properties: None,
        rules: Vec::new(),
    }
}

pub(super) fn string() -> Node {
    node(Shape::String)
}

/// A string of one of `values` (an OpenAPI `enum`).
pub(super) fn one_of(values: &'static [&'static str]) -> Node {
    Node {
        one_of: values,
        ..string()
    }
}

pub(super) fn int32() -> Node {
    node(Shape::Integer(Some("int32")))
}

pub(super) fn int64() -> Node {
    node(Shape::Integer(Some("int64")))
}

pub(super) fn boolean() -> Node {
    node(Shape::Boolean)
}

pub(super) fn int_or_string() -> Node {
    node(Shape::IntOrString)
}

pub(super) fn object(fields: Vec<(&'static str, Node)>) -> Node {
    node(Shape::Object {
        fields,
        required: &[],
    })
}

pub(super) fn map(values: Node) -> Node {
    node(Shape::Map(Box::new(values)))
}

pub(super) fn list(items: Node) -> Node {
    node(Shape::List(Box::new(items)))
}

pub(super) fn opaque() -> Node {
    node(Shape::Opaque)
}

pub(super) fn unmodelled() -> Node {
    node(Shape::Unmodelled)
}

impl Node {
    /// The properties an object requires.
    pub(super) fn required(mut self, names: &'static [&'static str]) -> Self {
        if let Shape::Object { required, .. } = &mut self.shape {
            *required = names;
        }
        self
    }

    pub(super) fn default(mut self, value: Value) -> Self {
        self.default = Some(value);
        self
    }

    pub(super) fn min_len(mut self, n: usize) -> Self {
        self.min_length = Some(n);
        self
    }

    pub(super) fn max_len(mut self, n: usize) -> Self {
        self.max_length = Some(n);
        self
    }

    pub(super) fn pattern(mut self, text: &'static str, test: TextRule) -> Self {
        self.pattern = Some(Pattern { text, test });
        self
    }

    pub(super) fn min(mut self, n: i64) -> Self {
        self.minimum = Some(n);
        self
    }

    pub(super) fn max(mut self, n: i64) -> Self {
        self.maximum = Some(n);
        self
    }

    pub(super) fn min_items(mut self, n: usize) -> Self {
        self.min_items = Some(n);
        self
    }

    pub(super) fn max_items(mut self, n: usize) -> Self {
        self.max_items = Some(n);
        self
    }

    pub(super) fn set(mut self) -> Self {
        self.set = true;
        self
    }

    pub(super) fn min_props(mut self, n: usize) -> Self {
        self.min_properties = Some(n);
        self
    }

    pub(super) fn max_props(mut self, n: usize) -> Self {
        self.max_properties = Some(n);
        self
    }

    /// A CEL rule over the node's value.
    pub(super) fn rule(mut self, message: &'static str, check: ValueRule) -> Self {
        self.rules.push(Rule {
            message,
            check: Check::Value(check),
        });
        self
    }

    /// A CEL rule over a string node's value.
    pub(super) fn text_rule(mut self, message: &'static str, check: TextRule) -> Self {
        self.rules.push(Rule {
            message,
            check: Check::Text(check),
        });
        self
    }

    fn field(&self, name: &str) -> Option<&Node> {
        match &self.shape {
            Shape::Object { fields, .. } => fields.iter().find(|(n, _)| *n == name).map(|(_, f)| f),
            _ => None,
        }
    }

    /// The type CEL errors quote (`Invalid value: "object"`).
    fn cel_type(&self) -> &'static str {
        match self.shape {
            Shape::String => "string",
            Shape::Integer(_) => "integer",
            Shape::Boolean => "boolean",
            Shape::IntOrString | Shape::Unmodelled => "",
            Shape::Object { .. } | Shape::Map(_) | Shape::Opaque => "object",
            Shape::List(_) => "array",
        }
    }
}

// ---------------------------------------------------------------------------------------
// Helpers for writing rules. After schema validation the types are right, so a value of
// the wrong type only reaches a rule through an opaque node; it then fails as CEL does.

/// CEL's `has(v.key)`.
pub(super) fn has(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(|x| !x.is_null())
}

/// `v.key`, or CEL's `no such key` error.
pub(super) fn get<'a>(v: &'a Value, key: &str) -> Result<&'a Value, String> {
    match v.get(key) {
        Some(x) if !x.is_null() => Ok(x),
        _ => Err(format!("no such key: {key}")),
    }
}

fn no_overload() -> String {
    "no such overload".to_owned()
}

/// `v.key` as a string.
pub(super) fn text<'a>(v: &'a Value, key: &str) -> Result<&'a str, String> {
    get(v, key)?.as_str().ok_or_else(no_overload)
}

/// `v.key` as an integer.
pub(super) fn int(v: &Value, key: &str) -> Result<i64, String> {
    get(v, key)?.as_i64().ok_or_else(no_overload)
}

/// `v.key` as a list.
pub(super) fn items<'a>(v: &'a Value, key: &str) -> Result<&'a [Value], String> {
    get(v, key)?
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(no_overload)
}

/// CEL's `&&` over already evaluated operands: false if any is false, else the first
/// error, else true.
pub(super) fn all_of(parts: &[Result<bool, String>]) -> Result<bool, String> {
    if parts.iter().any(|p| matches!(p, Ok(false))) {
        return Ok(false);
    }
    parts
        .iter()
        .find(|p| p.is_err())
        .cloned()
        .unwrap_or(Ok(true))
}

/// CEL's `||` (and `exists`): true if any is true, else the first error, else false.
pub(super) fn any_of(parts: &[Result<bool, String>]) -> Result<bool, String> {
    if parts.iter().any(|p| matches!(p, Ok(true))) {
        return Ok(true);
    }
    parts
        .iter()
        .find(|p| p.is_err())
        .cloned()
        .unwrap_or(Ok(false))
}

/// A string value itself.
pub(super) fn own_text(v: &Value) -> Result<&str, String> {
    v.as_str().ok_or_else(no_overload)
}

// ---------------------------------------------------------------------------------------
// The checker.

/// What checking a resource found.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    pub(super) unknown: Vec<String>,
    pub(super) invalid: Vec<String>,
}

/// The properties of a custom resource's root.
const ROOT_FIELDS: [&str; 5] = ["apiVersion", "kind", "metadata", "spec", "status"];

/// The error the API server adds when schema errors stop it from evaluating the rules.
const RULES_NOT_CHECKED: &str = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// Prunes `object` in place and checks its `spec` against `spec_schema`.
pub(super) fn check_resource(spec_schema: &Node, object: &mut Value) -> Outcome {
    let mut outcome = Outcome::default();
    let Some(root) = object.as_object_mut() else {
        return outcome;
    };
    root.retain(|key, _| {
        let known = ROOT_FIELDS.contains(&key.as_str());
        if !known {
            outcome.unknown.push(key.clone());
        }
        known
    });
    if root.get("spec").is_some_and(Value::is_null) {
        root.remove("spec");
    }
    let Some(spec) = root.get_mut("spec") else {
        return outcome;
    };
    prune(spec_schema, spec, "spec", &mut outcome.unknown);
    let mut defaulted = spec.clone();
    apply_defaults(spec_schema, &mut defaulted);
    let mut errors = Errors::default();
    validate(spec_schema, &defaulted, "spec", &mut errors);
    if errors.blocking {
        errors.messages.push(RULES_NOT_CHECKED.to_owned());
    } else {
        evaluate_rules(spec_schema, &defaulted, "spec", &mut errors.messages);
    }
    outcome.invalid = errors.messages;
    outcome
}

/// Fills in the defaults of `object["spec"]` in place.
pub(super) fn default_resource(spec_schema: &Node, object: &mut Value) {
    if let Some(spec) = object.get_mut("spec") {
        apply_defaults(spec_schema, spec);
    }
}

fn prune(node: &Node, value: &mut Value, path: &str, unknown: &mut Vec<String>) {
    match (&node.shape, value) {
        (Shape::Object { .. }, Value::Object(map)) => {
            map.retain(|key, child| match node.field(key) {
                None => {
                    unknown.push(format!("{path}.{key}"));
                    false
                }
                Some(schema) => !(child.is_null() && schema.default.is_none()),
            });
            for (key, child) in map.iter_mut() {
                if let Some(schema) = node.field(key) {
                    prune(schema, child, &format!("{path}.{key}"), unknown);
                }
            }
        }
        (Shape::Map(values), Value::Object(map)) => {
            if values.default.is_none() {
                map.retain(|_, child| !child.is_null());
            }
            for (key, child) in map.iter_mut() {
                prune(values, child, &format!("{path}.{key}"), unknown);
            }
        }
        (Shape::List(items), Value::Array(list)) => {
            for (i, child) in list.iter_mut().enumerate() {
                prune(items, child, &format!("{path}[{i}]"), unknown);
            }
        }
        _ => {}
    }
}

fn apply_defaults(node: &Node, value: &mut Value) {
    match (&node.shape, value) {
        (Shape::Object { fields, .. }, Value::Object(map)) => {
            for (name, schema) in fields {
                if let Some(default) = &schema.default {
                    if map.get(*name).is_none_or(Value::is_null) {
                        map.insert((*name).to_owned(), default.clone());
                    }
                }
            }
            for (name, schema) in fields {
                if let Some(child) = map.get_mut(*name) {
                    apply_defaults(schema, child);
                }
            }
        }
        (Shape::Map(values), Value::Object(map)) => {
            for child in map.values_mut() {
                apply_defaults(values, child);
            }
        }
        (Shape::List(items), Value::Array(list)) => {
            for child in list {
                apply_defaults(items, child);
            }
        }
        _ => {}
    }
}

#[derive(Debug, Default)]
struct Errors {
    messages: Vec<String>,
    /// An error of a type that makes the API server skip the rules.
    blocking: bool,
}

impl Errors {
    fn blocking(&mut self, message: String) {
        self.blocking = true;
        self.messages.push(message);
    }

    fn other(&mut self, message: String) {
        self.messages.push(message);
    }
}

/// A value as Kubernetes' field errors print a bad value: strings quoted, numbers and
/// booleans bare, anything else as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => quoted(s),
        other => other.to_string(),
    }
}

fn quoted(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// The JSON type name of `value` and the format Go's decoder gives it.
fn json_type(value: &Value) -> (&'static str, &'static str) {
    match value {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::Number(n) if n.is_i64() || n.is_u64() => ("integer", "int64"),
        Value::Number(_) => ("number", "double"),
        Value::String(_) => ("string", ""),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

fn is_integral(value: &Value) -> bool {
    match value {
        Value::Number(n) if n.is_i64() || n.is_u64() => true,
        Value::Number(n) => n.as_f64().is_some_and(|f| {
            f.is_finite() && f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0
        }),
        _ => false,
    }
}

fn type_error(path: &str, expected: &str, given: &str) -> String {
    format!(
        "{path}: Invalid value: {given:?}: {path} in body must be of type {expected}: {given:?}"
    )
}

/// kube-openapi's type validator.
fn check_type(node: &Node, value: &Value, path: &str, errors: &mut Errors) {
    let (expected, format): (&str, Option<&str>) = match node.shape {
        Shape::String => ("string", None),
        Shape::Integer(format) => ("integer", format),
        Shape::Boolean => ("boolean", None),
        Shape::IntOrString => ("integer,string", None),
        Shape::Object { .. } | Shape::Map(_) | Shape::Opaque => ("object", None),
        Shape::List(_) => ("array", None),
        Shape::Unmodelled => return,
    };
    let (given, given_format) = json_type(value);
    if value.is_null() {
        errors.blocking(type_error(path, expected, "null"));
        return;
    }
    let expects = |t: &str| expected.split(',').any(|e| e == t);
    let float_int = given == "number" && is_integral(value) && expects("integer");
    if let Some(format) = format {
        let scalar = !matches!(value, Value::String(_) | Value::Array(_));
        if scalar && !(expects(given) || given_format == format || float_int) {
            errors.blocking(type_error(path, format, given_format));
            return;
        }
    }
    if !(expects(given) || float_int) {
        errors.blocking(type_error(path, expected, given));
    }
}

fn validate(node: &Node, value: &Value, path: &str, errors: &mut Errors) {
    if let Shape::Unmodelled = node.shape {
        errors.other(format!("{path}: the emulator does not model this field"));
        return;
    }
    check_type(node, value, path, errors);
    if !value.is_null() {
        if let Shape::IntOrString = node.shape {
            if !(value.is_string() || is_integral(value)) {
                let (given, _) = json_type(value);
                errors.other(format!(
                    "<nil>: Invalid value: \"\": {:?} must validate at least one schema (anyOf)",
                    path
                ));
                errors.blocking(type_error(path, "integer", given));
            }
        }
        validate_value(node, value, path, errors);
    }
    if !node.one_of.is_empty() && !value.as_str().is_some_and(|s| node.one_of.contains(&s)) {
        let supported: Vec<String> = node.one_of.iter().map(|v| quoted(v)).collect();
        errors.blocking(format!(
            "{path}: Unsupported value: {}: supported values: {}",
            shown(value),
            supported.join(", ")
        ));
    }
    if let Value::Object(map) = value {
        let count = map.len();
        if let Some(min) = node.min_properties {
            if count < min {
                errors.other(format!(
                    "{path}: Invalid value: {count}: {path} in body should have at least {min} properties"
                ));
                return;
            }
        }
        if let Some(max) = node.max_properties {
            if count > max {
                errors.blocking(too_many(path, count, max));
                return;
            }
        }
        match &node.shape {
            Shape::Object { fields, required } => {
                for (name, schema) in fields {
                    if let Some(child) = map.get(*name) {
                        validate(schema, child, &format!("{path}.{name}"), errors);
                    }
                }
                for name in required.iter() {
                    if !map.contains_key(*name) {
                        errors.blocking(format!("{path}.{name}: Required value"));
                    }
                }
            }
            Shape::Map(values) => {
                for (key, child) in map {
                    validate(values, child, &format!("{path}.{key}"), errors);
                }
            }
            _ => {}
        }
    }
}

fn too_many(path: &str, count: usize, max: usize) -> String {
    let noun = if max == 1 { "item" } else { "items" };
    format!("{path}: Too many: {count}: must have at most {max} {noun}")
}

/// The string, number and list validators.
fn validate_value(node: &Node, value: &Value, path: &str, errors: &mut Errors) {
    match value {
        Value::String(s) => {
            let length = s.chars().count();
            if let Some(max) = node.max_length {
                if length > max {
                    let noun = if max == 1 { "byte" } else { "bytes" };
                    errors.blocking(format!(
                        "{path}: Too long: may not be more than {max} {noun}"
                    ));
                }
            }
            if let Some(min) = node.min_length {
                if length < min {
                    errors.other(format!(
                        "{path}: Invalid value: {}: {path} in body should be at least {min} chars long",
                        quoted(s)
                    ));
                }
            }
            if let Some(pattern) = node.pattern {
                if !(pattern.test)(s) {
                    errors.other(format!(
                        "{path}: Invalid value: {}: {path} in body should match '{}'",
                        quoted(s),
                        pattern.text
                    ));
                }
            }
        }
        Value::Number(n) => {
            let number = n.as_f64().unwrap_or(0.0);
            if let Some(min) = node.minimum {
                if number < min as f64 {
                    errors.other(format!(
                        "{path}: Invalid value: {n}: {path} in body should be greater than or equal to {min}"
                    ));
                }
            }
            if let Some(max) = node.maximum {
                if number > max as f64 {
                    errors.other(format!(
                        "{path}: Invalid value: {n}: {path} in body should be less than or equal to {max}"
                    ));
                }
            }
        }
        Value::Array(list) => {
            if let Shape::List(items) = &node.shape {
                for (i, item) in list.iter().enumerate() {
                    validate(items, item, &format!("{path}[{i}]"), errors);
                }
            }
            if let Some(min) = node.min_items {
                if list.len() < min {
                    errors.other(format!(
                        "{path}: Invalid value: {}: {path} in body should have at least {min} items",
                        list.len()
                    ));
                }
            }
            if let Some(max) = node.max_items {
                if list.len() > max {
                    errors.blocking(too_many(path, list.len(), max));
                }
            }
            if node.set {
                for (i, item) in list.iter().enumerate() {
                    if list[..i].contains(item) {
                        errors.other(format!("{path}[{i}]: Duplicate value: {}", shown(item)));
                    }
                }
            }
        }
        _ => {}
    }
}

fn evaluate_rules(node: &Node, value: &Value, path: &str, out: &mut Vec<String>) {
    if value.is_null() {
        return;
    }
    for rule in &node.rules {
        let result = match rule.check {
            Check::Value(check) => check(value),
            Check::Text(check) => Ok(value.as_str().is_none_or(check)),
        };
        let kind = node.cel_type();
        match result {
            Ok(true) => {}
            Ok(false) => out.push(format!("{path}: Invalid value: {kind:?}: {}", rule.message)),
            Err(error) => out.push(format!(
                "{path}: Invalid value: {kind:?}: {error} evaluating rule: {}",
                rule.message
            )),
        }
    }
    match (&node.shape, value) {
        (Shape::Object { fields, .. }, Value::Object(map)) => {
            for (name, schema) in fields {
                if let Some(child) = map.get(*name) {
                    evaluate_rules(schema, child, &format!("{path}.{name}"), out);
                }
            }
        }
        (Shape::Map(values), Value::Object(map)) => {
            for (key, child) in map {
                evaluate_rules(values, child, &format!("{path}[{key}]"), out);
            }
        }
        (Shape::List(items), Value::Array(list)) => {
            for (i, child) in list.iter().enumerate() {
                evaluate_rules(items, child, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

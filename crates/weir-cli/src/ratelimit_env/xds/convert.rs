//! An xDS update's `RateLimitConfig` resources into one `RuleSet`, as ratelimit turns them
//! into its YAML root (`src/config/config_xds.go`) and loads them with its file loader:
//! each resource becomes the rule file it stands for and goes through
//! `weir_config::RuleSet::parse`, the loader of every rule file, so an update is validated
//! exactly as a file is (wildcards, `replaces`, bounds, refusals). A domain in two
//! resources is refused, or merged under `MERGE_DOMAIN_CONFIG`. `metadata` is left out:
//! the file loader reads it and ignores it. Any resource that does not decode, or that the
//! loader refuses, fails the whole update (the caller NACKs it and keeps the rules in force).

use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::ratelimit::config::ratelimit::v3::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit,
};
use prost::Message as _;
use serde_json::{json, Map, Value};
use weir_config::{ConfigError, RuleSet};

/// The resource type Weir subscribes to.
pub(crate) const TYPE_URL: &str =
    "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/// The longest resource name repeated in an error.
const MAX_NAME_IN_ERRORS: usize = 128;

/// The rules of every resource of one update.
pub(crate) fn rules(resources: &[Any], merge_domains: bool) -> Result<RuleSet, ConfigError> {
    if resources.len() > weir_config::bounds::MAX_FILES {
        return Err(rejected(
            "update",
            format!("more than {} resources", weir_config::bounds::MAX_FILES),
        ));
    }
    let mut set = RuleSet::default();
    for (index, resource) in resources.iter().enumerate() {
        let place = format!("resource {index}");
        if resource.type_url != TYPE_URL {
            return Err(rejected(
                &place,
                format!("type {:?}, expected {TYPE_URL}", resource.type_url),
            ));
        }
        let config = RateLimitConfig::decode(resource.value.as_slice())
            .map_err(|e| rejected(&place, format!("not a RateLimitConfig: {e}")))?;
        let loaded = RuleSet::parse(&source_name(index, &config.name), &yaml(&config))?;
        set = if merge_domains {
            set.merge_domains(loaded)?
        } else {
            set.merge(loaded)?
        };
    }
    Ok(set)
}

/// How errors name a resource: `xds:<name>` (bounded), or its place when it has no name.
fn source_name(index: usize, name: &str) -> String {
    if name.is_empty() {
        return format!("xds:resource {index}");
    }
    let mut end = name.len().min(MAX_NAME_IN_ERRORS);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("xds:{}", &name[..end])
}

fn rejected(place: &str, reason: String) -> ConfigError {
    ConfigError::Rejected {
        origin: format!("xds:{place}").into(),
        reason,
    }
}

/// The rule file a resource stands for, as YAML (JSON, one field a line, so errors name a
/// useful line).
pub(crate) fn yaml(config: &RateLimitConfig) -> String {
    let root = json!({
        "domain": config.domain,
        "descriptors": config.descriptors.iter().map(descriptor).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&root).unwrap_or_default()
}

fn descriptor(d: &RateLimitDescriptor) -> Value {
    let mut out = Map::new();
    out.insert("key".into(), json!(d.key));
    if !d.value.is_empty() {
        out.insert("value".into(), json!(d.value));
    }
    if let Some(policy) = &d.rate_limit {
        out.insert("rate_limit".into(), rate_limit(policy));
    }
    if !d.descriptors.is_empty() {
        let nested: Vec<_> = d.descriptors.iter().map(descriptor).collect();
        out.insert("descriptors".into(), Value::Array(nested));
    }
    for (name, on) in [
        ("shadow_mode", d.shadow_mode),
        ("detailed_metric", d.detailed_metric),
        ("quota_mode", d.quota_mode),
    ] {
        if on {
            out.insert(name.into(), Value::Bool(true));
        }
    }
    Value::Object(out)
}

fn rate_limit(p: &RateLimitPolicy) -> Value {
    let mut out = Map::new();
    // As ratelimit: UNKNOWN with `unlimited` is no unit at all; without it, an invalid unit
    // the loader refuses. A number outside the enum is named as such.
    match RateLimitUnit::try_from(p.unit) {
        Ok(RateLimitUnit::Unknown) if p.unlimited => {}
        Ok(unit) => {
            out.insert("unit".into(), json!(unit.as_str_name()));
        }
        Err(_) => {
            out.insert("unit".into(), json!(format!("unit number {}", p.unit)));
        }
    }
    if !p.unlimited || p.requests_per_unit != 0 {
        out.insert("requests_per_unit".into(), json!(p.requests_per_unit));
    }
    if p.unlimited {
        out.insert("unlimited".into(), Value::Bool(true));
    }
    if !p.name.is_empty() {
        out.insert("name".into(), json!(p.name));
    }
    if !p.replaces.is_empty() {
        let replaces: Vec<_> = p.replaces.iter().map(|r| json!({"name": r.name})).collect();
        out.insert("replaces".into(), Value::Array(replaces));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::ratelimit::config::ratelimit::v3::RateLimitReplace;

    fn policy(unit: RateLimitUnit, n: u32) -> Option<RateLimitPolicy> {
        Some(RateLimitPolicy {
            unit: unit as i32,
            requests_per_unit: n,
            ..RateLimitPolicy::default()
        })
    }

    fn any(config: &RateLimitConfig) -> Any {
        Any {
            type_url: TYPE_URL.to_string(),
            value: config.encode_to_vec(),
        }
    }

    fn config(name: &str, domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitConfig {
        RateLimitConfig {
            name: name.into(),
            domain: domain.into(),
            descriptors,
        }
    }

    fn leaf(key: &str, value: &str, rate_limit: Option<RateLimitPolicy>) -> RateLimitDescriptor {
        RateLimitDescriptor {
            key: key.into(),
            value: value.into(),
            rate_limit,
            ..RateLimitDescriptor::default()
        }
    }

    #[test]
    fn every_field_of_the_proto_reaches_the_loader() {
        let named = RateLimitPolicy {
            name: "per_user".into(),
            replaces: vec![RateLimitReplace {
                name: "other".into(),
            }],
            ..policy(RateLimitUnit::Minute, 5).unwrap()
        };
        let c = config(
            "c",
            "d",
            vec![
                RateLimitDescriptor {
                    descriptors: vec![leaf("user", "", Some(named))],
                    shadow_mode: true,
                    ..leaf("path", "/a*", policy(RateLimitUnit::Second, 1))
                },
                RateLimitDescriptor {
                    quota_mode: true,
                    detailed_metric: true,
                    ..leaf("other", "", policy(RateLimitUnit::Hour, 2))
                },
                leaf(
                    "open",
                    "",
                    Some(RateLimitPolicy {
                        unlimited: true,
                        ..RateLimitPolicy::default()
                    }),
                ),
            ],
        );
        let text = yaml(&c);
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["descriptors"][0]["value"], "/a*");
        assert_eq!(value["descriptors"][0]["shadow_mode"], true);
        assert_eq!(value["descriptors"][0]["rate_limit"]["unit"], "SECOND");
        let nested = &value["descriptors"][0]["descriptors"][0]["rate_limit"];
        assert_eq!(nested["name"], "per_user");
        assert_eq!(nested["replaces"][0]["name"], "other");
        assert_eq!(value["descriptors"][1]["quota_mode"], true);
        assert_eq!(value["descriptors"][1]["detailed_metric"], true);
        assert_eq!(
            value["descriptors"][2]["rate_limit"],
            json!({"unlimited": true})
        );
        let set = rules(&[any(&c)], false).unwrap();
        assert_eq!(set.domains().collect::<Vec<_>>(), ["d"]);
        assert_eq!(set.rules().len(), 4);
    }

    #[test]
    fn a_bad_resource_fails_the_whole_update_naming_it() {
        let good = config(
            "good",
            "a",
            vec![leaf("k", "", policy(RateLimitUnit::Second, 1))],
        );
        let no_unit = config(
            "no-unit",
            "b",
            vec![leaf("k", "", policy(RateLimitUnit::Unknown, 1))],
        );
        let err = rules(&[any(&good), any(&no_unit)], false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("xds:no-unit"), "{err}");
        let odd_unit = RateLimitPolicy {
            unit: 42,
            requests_per_unit: 1,
            ..RateLimitPolicy::default()
        };
        let odd = config("odd", "c", vec![leaf("k", "", Some(odd_unit))]);
        let err = rules(&[any(&odd)], false).unwrap_err().to_string();
        assert!(err.contains("xds:odd") && err.contains("42"), "{err}");
        let wrong_type = Any {
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            value: Vec::new(),
        };
        let err = rules(&[wrong_type], false).unwrap_err().to_string();
        assert!(
            err.contains("resource 0") && err.contains("Cluster"),
            "{err}"
        );
        let garbage = Any {
            type_url: TYPE_URL.into(),
            value: vec![0xff, 0xff, 0xff],
        };
        let err = rules(&[garbage], false).unwrap_err().to_string();
        assert!(err.contains("not a RateLimitConfig"), "{err}");
    }

    #[test]
    fn a_domain_in_two_resources_is_refused_unless_merged() {
        let one = config(
            "one",
            "d",
            vec![leaf("a", "", policy(RateLimitUnit::Second, 1))],
        );
        let two = config(
            "two",
            "d",
            vec![leaf("b", "", policy(RateLimitUnit::Second, 1))],
        );
        let err = rules(&[any(&one), any(&two)], false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("domain 'd' is already defined"), "{err}");
        let merged = rules(&[any(&one), any(&two)], true).unwrap();
        assert_eq!(merged.rules().len(), 2);
        assert!(rules(&[], false).unwrap().is_empty());
    }

    #[test]
    fn a_long_name_is_cut_on_a_character_boundary() {
        let name = "é".repeat(200);
        let named = source_name(0, &name);
        assert!(named.len() <= MAX_NAME_IN_ERRORS + 4, "{named}");
        assert_eq!(source_name(3, ""), "xds:resource 3");
    }
}

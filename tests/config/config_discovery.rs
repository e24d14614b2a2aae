//! Reading and validating a cluster's `Discovery` and `LocalityTiers` sections: one
//! source or several, every default, every bad value an error naming cluster, key path and
//! value, unknown keys warned about.

// Some tests need the `dns` or `kubernetes` feature; without them their imports go unused.
#![cfg_attr(
    not(all(feature = "dns", feature = "kubernetes")),
    allow(unused_imports)
)]

use std::time::Duration;

use healthpick::config::{
    check, Config, DnsRecord, GuardMode, SourceConfig, LOCAL_REGION_VAR, LOCAL_ZONE_VAR,
};
use healthpick::PolicyRegistry;

fn report(text: &str) -> healthpick::config::CheckReport {
    check(text, &PolicyRegistry::default(), false)
}

fn errors(text: &str) -> Vec<String> {
    report(text).errors.iter().map(|d| d.to_string()).collect()
}

#[cfg(feature = "dns")]
#[test]
fn a_dns_source_reads_every_setting_and_defaults_the_rest() {
    let text = r#"{"Clusters": {"payments": {
        "Discovery": {
            "Type": "dns", "Name": "payments.svc.test", "Port": "8443", "Scheme": "HTTPS",
            "Servers": ["127.0.0.1:5353", "[::1]:53"], "Timeout": "00:00:02",
            "MinRefresh": "1s", "MaxRefresh": "00:01:00", "Jitter": 0.25,
            "FirstAnswerWithin": "00:00:03",
            "Guard": {"Policy": "never", "MaxRemovedShare": "0.3", "ConfirmAfter": "00:00:45"}
        },
        "LocalityTiers": {"LocalZone": "eu-1a", "Tiers": {"us-east-1a": 4}}
    }}}"#;
    let config = Config::from_json(text).expect("valid");
    let cluster = &config.clusters()[0];
    let [source] = cluster.discovery_sources() else {
        panic!("one source")
    };
    assert_eq!(
        source.source_name(),
        "dns",
        "named after its type by default"
    );
    let SourceConfig::Dns(dns) = source.source() else {
        panic!("{source:?}")
    };
    assert_eq!(dns.dns_name(), "payments.svc.test");
    assert_eq!(dns.record(), DnsRecord::Address);
    assert_eq!(dns.port(), Some(8443));
    assert_eq!(dns.url_scheme(), "https");
    assert_eq!(dns.name_servers().len(), 2);
    assert_eq!(dns.lookup_timeout(), Duration::from_secs(2));
    let refresh = source.refresh_bounds();
    assert_eq!(
        (refresh.min(), refresh.max(), refresh.jitter_share()),
        (Duration::from_secs(1), Duration::from_secs(60), 0.25)
    );
    assert_eq!(source.first_answer_wait(), Duration::from_secs(3));
    let guard = source.guard_policy();
    assert_eq!(guard.mode(), GuardMode::Never);
    assert_eq!(guard.removed_share(), 0.3);
    assert_eq!(guard.confirmation_delay(), Duration::from_secs(45));
    let tiers = cluster.locality_tiers_setting().expect("on");
    assert_eq!(tiers.local_zone_setting(), Some("eu-1a"));
    assert_eq!(
        tiers.local_region_setting(),
        None,
        "from the environment then"
    );
    assert_eq!(tiers.named_tiers().get("us-east-1a"), Some(&4));
    // The names a process takes its own locality from.
    assert_eq!(
        (LOCAL_ZONE_VAR, LOCAL_REGION_VAR),
        ("HEALTHPICK_LOCAL_ZONE", "HEALTHPICK_LOCAL_REGION")
    );
}

#[cfg(feature = "dns")]
#[test]
fn several_sources_are_an_array_and_need_distinct_names() {
    let text = r#"{"Clusters": {"c": {"Discovery": [
        {"Type": "Dns", "Name": "a.test", "Port": 80},
        {"Type": "Dns", "Name": "b.test", "Record": "SRV", "Source": "dns-b"},
        {"Type": "ResolveDestinations"}
    ]}}}"#;
    let config = Config::from_json(text).expect("valid");
    let names: Vec<String> = config.clusters()[0]
        .discovery_sources()
        .iter()
        .map(|s| s.source_name())
        .collect();
    assert_eq!(names, ["dns", "dns-b", "resolvedestinations"]);
    assert!(config.clusters()[0].resolves_destinations());

    let clash = r#"{"Clusters": {"c": {"Discovery": [
        {"Type": "Dns", "Name": "a.test", "Port": 80},
        {"Type": "Dns", "Name": "b.test", "Port": 80}
    ]}}}"#;
    let errors = errors(clash);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with(
            "Clusters:c:Discovery:1:Source: cluster `c`: two discovery sources are called `dns`"
        ),
        "{errors:?}"
    );
}

#[test]
fn every_bad_value_is_named_at_once() {
    let text = r#"{"Clusters": {"pay": {
        "Discovery": {
            "Type": "Dns", "Record": "MX", "Port": 70000, "Scheme": "ftp",
            "Servers": ["localhost:53", "127.0.0.1:53"], "Timeout": "soon",
            "MinRefresh": "00:05:00", "MaxRefresh": "00:00:10", "Jitter": 2,
            "Guard": {"Policy": "Sometimes", "MaxRemovedShare": "-1"},
            "Colour": "blue"
        },
        "LocalityTiers": {"Tiers": {"eu": "first"}}
    }}}"#;
    let r = report(text);
    let errors: Vec<String> = r.errors.iter().map(|d| d.to_string()).collect();
    let expect = [
        "Clusters:pay:Discovery:Name: cluster `pay`: a Dns source needs the Name",
        "Clusters:pay:Discovery:Record: cluster `pay`: Record `MX` is not A, AAAA or SRV",
        "Clusters:pay:Discovery:Port: cluster `pay`: Port `70000` is not a port",
        "Clusters:pay:Discovery:Scheme: cluster `pay`: Scheme `ftp` is not http or https",
        "Clusters:pay:Discovery:Servers:0: cluster `pay`: server `localhost:53` is not an ip:port address",
        "Clusters:pay:Discovery:Timeout: cluster `pay`: Timeout",
        "Clusters:pay:Discovery:MinRefresh: cluster `pay`: MinRefresh (300000 ms) is longer than MaxRefresh (10000 ms)",
        "Clusters:pay:Discovery:Jitter: cluster `pay`: Jitter `2` is not a share from 0 to 1",
        "Clusters:pay:Discovery:Guard:Policy: cluster `pay`: guard Policy `Sometimes` is not AfterConfirmation, Never or Immediately",
        "Clusters:pay:Discovery:Guard:MaxRemovedShare: cluster `pay`: MaxRemovedShare `-1` is not a share from 0 to 1",
        "Clusters:pay:LocalityTiers:Tiers:eu: cluster `pay`: eu `first` is not an integer",
    ];
    for needle in expect {
        assert!(
            errors.iter().any(|e| e.starts_with(needle)),
            "missing {needle}\nin {errors:#?}"
        );
    }
    assert!(
        r.warnings
            .iter()
            .any(|w| w.path == "Clusters:pay:Discovery:Colour"
                && w.message.contains("is not a key of this section")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn unknown_types_and_a_missing_type_are_errors_listing_the_known_ones() {
    let errors = errors(r#"{"Clusters": {"c": {"Discovery": {"Type": "Zookeeper"}}}}"#);
    assert_eq!(
        errors,
        ["Clusters:c:Discovery:Type: cluster `c`: discovery Type `Zookeeper` is not a known source (known: Dns, ResolveDestinations, Etcd, Consul, Kubernetes)"]
    );
    let errors = self::errors(r#"{"Clusters": {"c": {"Discovery": {"Name": "x.test"}}}}"#);
    assert_eq!(
        errors,
        ["Clusters:c:Discovery:Type: cluster `c`: a discovery source needs a Type (one of: Dns, ResolveDestinations, Etcd, Consul, Kubernetes)"]
    );
}

#[cfg(all(feature = "etcd", feature = "consul"))]
#[test]
fn etcd_and_consul_sources_read_every_setting() {
    let text = r#"{"Clusters": {"pay": {
        "Discovery": [
            {"Type": "Etcd", "Endpoints": ["http://10.0.0.5:2379", "https://10.0.0.6:2379"],
             "Prefix": "/services/pay/", "Timeout": "00:00:02", "MaxRefresh": "00:01:00"},
            {"Type": "consul", "Service": "pay", "Address": "10.0.0.9:8500",
             "Datacenters": ["eu-west", "eu-central"], "Tag": "v2", "Token": "t0k3n",
             "Wait": "00:01:00", "Stale": true, "Scheme": "https", "Timeout": "00:00:03"}
        ]
    }}}"#;
    let config = Config::from_json(text).expect("valid");
    let [etcd, consul] = config.clusters()[0].discovery_sources() else {
        panic!("two sources")
    };
    assert_eq!(
        (etcd.source_name(), consul.source_name()),
        ("etcd".into(), "consul".into())
    );
    let SourceConfig::Etcd(etcd) = etcd.source() else {
        panic!("{etcd:?}")
    };
    assert_eq!(etcd.endpoint_urls().len(), 2);
    assert_eq!(etcd.key_prefix(), "/services/pay/");
    assert_eq!(etcd.call_timeout(), Duration::from_secs(2));
    let SourceConfig::Consul(consul) = consul.source() else {
        panic!("{consul:?}")
    };
    assert_eq!(consul.service(), "pay");
    assert_eq!(
        consul.agent_address().map(|u| u.as_str()),
        Some("http://10.0.0.9:8500/")
    );
    assert_eq!(consul.datacenter_list(), ["eu-west", "eu-central"]);
    assert_eq!(consul.tag_filter(), Some("v2"));
    assert_eq!(consul.token_setting(), Some("t0k3n"));
    assert_eq!(consul.blocking_wait(), Duration::from_secs(60));
    assert_eq!(
        consul.max_stale(),
        Some(Duration::from_secs(10)),
        "Stale alone allows 10 s"
    );
    assert_eq!(consul.url_scheme(), "https");
    assert_eq!(consul.call_timeout(), Duration::from_secs(3));
}

#[test]
fn every_bad_etcd_and_consul_value_is_named_at_once() {
    let text = r#"{"Clusters": {"pay": {
        "Discovery": [
            {"Type": "Etcd", "Endpoints": ["10.0.0.5:2379", "ftp://x"], "Prefix": "", "Timeout": "-1"},
            {"Type": "Etcd", "Source": "etcd2"},
            {"Type": "Consul", "Address": "http://[bad", "Wait": "00:11:00", "Scheme": "gopher",
             "Datacenters": [["nested"]], "Stale": "maybe"},
            {"Type": "Consul", "Source": "c2", "Service": "pay", "Colour": "blue"}
        ]
    }}}"#;
    let r = report(text);
    let errors: Vec<String> = r.errors.iter().map(|d| d.to_string()).collect();
    let expect = [
        "Clusters:pay:Discovery:0:Endpoints:0: cluster `pay`: `10.0.0.5:2379` is not an http(s) URL",
        "Clusters:pay:Discovery:0:Endpoints:1: cluster `pay`: `ftp://x` is not an http(s) URL",
        "Clusters:pay:Discovery:0:Prefix: cluster `pay`: an Etcd source needs the key Prefix",
        "Clusters:pay:Discovery:0:Timeout: cluster `pay`: Timeout",
        "Clusters:pay:Discovery:1:Endpoints: cluster `pay`: an Etcd source needs the Endpoints",
        "Clusters:pay:Discovery:1:Prefix: cluster `pay`: an Etcd source needs the key Prefix",
        "Clusters:pay:Discovery:2:Service: cluster `pay`: a Consul source needs the Service",
        "Clusters:pay:Discovery:2:Address: cluster `pay`: Address `http://[bad` is not the URL of a Consul agent",
        "Clusters:pay:Discovery:2:Wait: cluster `pay`: Wait (660 s) is longer than Consul's longest blocking query",
        "Clusters:pay:Discovery:2:Scheme: cluster `pay`: Scheme `gopher` is not http or https",
        "Clusters:pay:Discovery:2:Datacenters:0: cluster `pay`: Datacenters entries must be text",
        "Clusters:pay:Discovery:2:Stale: cluster `pay`:",
    ];
    for needle in expect {
        assert!(
            errors.iter().any(|e| e.starts_with(needle)),
            "missing {needle}\nin {errors:#?}"
        );
    }
    assert!(
        r.warnings
            .iter()
            .any(|w| w.path == "Clusters:pay:Discovery:3:Colour"),
        "{:?}",
        r.warnings
    );
}

#[cfg(feature = "kubernetes")]
#[test]
fn kubernetes_sources_read_every_setting_and_name_every_bad_value() {
    let config = Config::from_json(
        r#"{"Clusters": {"web": {"Discovery": {"Type": "kubernetes", "Service": "web",
            "Namespace": "shop", "PortName": "http", "Scheme": "HTTPS", "Context": "prod",
            "Resync": "00:02:00", "IdleTimeout": "00:01:00", "LocalZone": "eu-west-1a"}}}}"#,
    )
    .expect("valid");
    let source = &config.clusters()[0].discovery_sources()[0];
    assert_eq!(source.source_name(), "kubernetes");
    let SourceConfig::Kubernetes(k) = source.source() else {
        panic!("{source:?}")
    };
    assert_eq!(k.service(), "web");
    assert_eq!(k.namespace_setting(), Some("shop"));
    assert_eq!(k.port_name_setting(), Some("http"));
    assert_eq!(k.url_scheme(), "https");
    assert_eq!(k.context_setting(), Some("prod"));
    assert_eq!(k.resync_period(), Duration::from_secs(120));
    assert_eq!(k.watch_idle_timeout(), Duration::from_secs(60));
    assert_eq!(k.local_zone_setting(), Some("eu-west-1a"));
    assert_eq!(source.source().target(), "service shop/web:http");

    let defaults = Config::from_json(
        r#"{"Clusters": {"web": {"Discovery": {"Type": "Kubernetes", "Service": "web"}}}}"#,
    )
    .expect("valid");
    let SourceConfig::Kubernetes(k) = defaults.clusters()[0].discovery_sources()[0].source() else {
        panic!("kubernetes")
    };
    assert_eq!(
        (k.namespace_setting(), k.port_name_setting(), k.url_scheme()),
        (None, None, "http")
    );
    assert_eq!(k.resync_period(), Duration::from_secs(600));
    assert_eq!(k.watch_idle_timeout(), Duration::from_secs(300));

    let r = report(
        r#"{"Clusters": {"web": {"Discovery": [
            {"Type": "Kubernetes", "Service": "Web_App", "Namespace": "a/b", "Scheme": "gopher",
             "Resync": "00:00:00.5", "IdleTimeout": "00:00:05", "Colour": "blue"},
            {"Type": "Kubernetes", "Source": "k2"}
        ]}}}"#,
    );
    let errors: Vec<String> = r.errors.iter().map(|d| d.to_string()).collect();
    for needle in [
        "Clusters:web:Discovery:0:Service: cluster `web`: Service `Web_App` is not a Kubernetes Service name",
        "Clusters:web:Discovery:0:Namespace: cluster `web`: Namespace `a/b` is not a Kubernetes namespace name",
        "Clusters:web:Discovery:0:Scheme: cluster `web`: Scheme `gopher` is not http or https",
        "Clusters:web:Discovery:0:Resync: cluster `web`: Resync (500 ms) is under 1 s",
        "Clusters:web:Discovery:0:IdleTimeout: cluster `web`: IdleTimeout (5000 ms) is under 6 s",
        "Clusters:web:Discovery:1:Service: cluster `web`: a Kubernetes source needs the Service",
    ] {
        assert!(
            errors.iter().any(|e| e.starts_with(needle)),
            "missing {needle}\nin {errors:#?}"
        );
    }
    assert_eq!(errors.len(), 6, "{errors:#?}");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.path == "Clusters:web:Discovery:0:Colour"),
        "{:?}",
        r.warnings
    );
}

#[test]
fn locality_tiers_can_be_switched_off() {
    let config = Config::from_json(
        r#"{"Clusters": {"c": {"LocalityTiers": {"Enabled": false, "LocalZone": "z"}}}}"#,
    )
    .expect("valid");
    assert!(config.clusters()[0].locality_tiers_setting().is_none());
}

#[cfg(not(feature = "dns"))]
#[test]
fn a_source_whose_feature_is_not_compiled_in_is_an_error() {
    let errors = errors(
        r#"{"Clusters": {"c": {"Discovery": {"Type": "Dns", "Name": "a.test", "Port": 80}}}}"#,
    );
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].contains("needs healthpick's `dns` cargo feature"),
        "{errors:?}"
    );
}

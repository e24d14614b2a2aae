//! What the configuration accepts can be run: a `Dns` source's `Name` is a DNS name the source
//! can look up (anything else is a configuration error naming the cluster, key path and value),
//! and an `Address` is judged by the same length rule wherever it is checked (the parsed URL),
//! so a cluster that loads can always build its probe requests.

use healthpick::config::{
    ClusterConfig, Config, DestinationConfig, DiscoveryConfig, DnsSourceConfig, SourceConfig,
};
use healthpick::{probe_uri, Endpoint, Engine, MAX_ADDRESS_LEN};

fn dns_document(name: &str) -> String {
    format!(
        r#"{{"Clusters": {{"payments": {{"Discovery": {{"Type": "Dns", "Name": {}, "Port": 8080,
            "Servers": ["127.0.0.1:53"]}}}}}}}}"#,
        serde_json::to_string(name).unwrap()
    )
}

/// Names no resolver can be asked for: configuration errors, at `Discovery:Name`, naming the
/// cluster and the value, whether the configuration is JSON or built in code.
#[test]
fn a_dns_name_that_is_not_a_dns_name_is_a_configuration_error() {
    for name in [
        "pay`ments.test",
        "xn--bcher-kvq.test",
        "payments..test",
        "pay ments.test",
        "payments.test/x",
        "-payments.test",
        &format!("{}.test", "a".repeat(64)),
        &format!("{}test", "abcdefghi.".repeat(26)),
    ] {
        let error = Engine::from_json(&dns_document(name))
            .expect_err(name)
            .to_string();
        assert!(
            error.contains("Clusters:payments:Discovery:Name")
                && error.contains("cluster `payments`")
                && error.contains(&format!("Name `{}", &name[..name.len().min(60)]))
                && error.contains("is not a DNS name"),
            "{name}: {error}"
        );
        let config = Config::new().cluster(ClusterConfig::new("payments").discovery(
            DiscoveryConfig::new(SourceConfig::Dns(DnsSourceConfig::address(name, 8080))),
        ));
        let error = Engine::new(config).expect_err(name).to_string();
        assert!(error.contains("is not a DNS name"), "{name}: {error}");
    }
}

/// Names a resolver is asked for as they are: accepted, and the source can be built from them.
#[test]
fn dns_names_that_can_be_looked_up_are_accepted() {
    for name in [
        "payments.service.test",
        "payments.test.",
        "Payments.Service.Test",
        "_http._tcp.payments.test",
        "bücher.test",
        "xn--bcher-kva.test",
        "a-b-.test",
        "1payments.test",
        &format!("{}.test", "a".repeat(63)),
    ] {
        let engine =
            Engine::from_json(&dns_document(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        #[cfg(feature = "dns")]
        {
            let cluster = &engine.status().clusters[0];
            assert_eq!(cluster.id, "payments");
            let config =
                DnsSourceConfig::address(name, 8080).servers(vec!["127.0.0.1:53".parse().unwrap()]);
            healthpick::discovery::dns::DnsSource::new(&config)
                .unwrap_or_else(|e| panic!("{name}: accepted but cannot be built: {e}"));
        }
        drop(engine);
    }
}

/// `http://h/` and 400 `é`: 809 bytes as written, 2,409 once parsed (percent-encoded). Refused
/// by the configuration as by the engine, with one rule: the parsed URL's length. A value that
/// stays under the limit once parsed loads, and its probe requests can be built.
#[test]
fn an_address_is_judged_by_its_parsed_length_everywhere() {
    let long = format!("http://h/{}", "é".repeat(400));
    assert!(long.len() < MAX_ADDRESS_LEN);
    let document = |address: &str| {
        format!(
            r#"{{"Clusters": {{"c": {{"HealthCheck": {{"Active": {{"Enabled": true, "Path": "/health"}}}},
                "Destinations": {{"d": {{"Address": {}}}}}}}}}}}"#,
            serde_json::to_string(address).unwrap()
        )
    };
    let error = Engine::from_json(&document(&long)).unwrap_err().to_string();
    assert!(
        error.contains("Clusters:c:Destinations:d:Address") && error.contains("2409 bytes"),
        "{error}"
    );
    let config = Config::new()
        .cluster(ClusterConfig::new("c").destination(DestinationConfig::new("d", long.clone())));
    assert!(Engine::new(config).is_err());
    assert!(Engine::from_json(r#"{"Clusters": {"c": {}}}"#)
        .unwrap()
        .set_destinations("c", "s", vec![Endpoint::new("d", long.parse().unwrap())])
        .is_err());
    // The probe base and a health URL follow the same rule.
    assert!(probe_uri(&long, None, None).is_err());
    let health = format!(
        r#"{{"Clusters": {{"c": {{"Destinations": {{"d": {{"Address": "http://h/", "Health": {}}}}}}}}}}}"#,
        serde_json::to_string(&long).unwrap()
    );
    assert!(Engine::from_json(&health).is_err());

    // 200 `é` parse to 1,209 bytes: accepted everywhere, and probed.
    let fits = format!("http://h/{}", "é".repeat(200));
    let engine = Engine::from_json(&document(&fits)).unwrap();
    let d = &engine.status().clusters[0].destinations[0];
    assert!(probe_uri(&d.address, Some("/health"), None).is_ok());
}

//! Clients for test traffic.

/// A reqwest client that never goes through a proxy from the environment.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client")
}

//! Which Prometheus servers triggers may point the scaler at.

use std::fmt;

use http::Uri;

/// The Prometheus base URLs triggers may use (`--allow-prometheus`): a trigger's
/// `prometheusURL` must have an allowed URL's scheme, host and port, and its path must start
/// with the allowed path at a `/` boundary. Paths with `.` or `..` segments, any
/// percent-encoded byte (`%2e`, `%2f`, `%5c`, a double-encoded `%252e`, an overlong `%c0%ae`,
/// ...), a backslash or `;`, and URLs with credentials, are never allowed: a proxy in front of
/// Prometheus could decode or resolve them outside the prefix. Empty allows every URL.
///
/// ```
/// use admit_scaler::service::AllowList;
///
/// let allow = AllowList::new(["http://prometheus.monitoring:9090/prom".parse()?]).unwrap();
/// assert!(allow.permits(&"http://prometheus.monitoring:9090/prom".parse()?));
/// assert!(allow.permits(&"http://PROMETHEUS.monitoring:9090/prom/team-a".parse()?));
/// assert!(!allow.permits(&"http://prometheus.monitoring:9090/prometheus".parse()?));
/// assert!(!allow.permits(&"https://prometheus.monitoring:9090/prom".parse()?));
/// assert!(!allow.permits(&"http://metadata.internal/prom".parse()?));
/// assert!(!allow.permits(&"http://prometheus.monitoring:9090/prom/../admin".parse()?));
/// assert!(!allow.permits(&"http://prometheus.monitoring:9090/prom/..%2fadmin".parse()?));
/// assert!(!allow.permits(&"http://prometheus.monitoring:9090/prom/%252e%252e/admin".parse()?));
/// assert!(AllowList::default().permits(&"http://anything:1234".parse()?));
/// // A URL that cannot be a prefix is an error, never a silently shorter list.
/// assert!(AllowList::new(["prometheus.monitoring:9090".parse()?]).is_err());
/// # Ok::<(), http::uri::InvalidUri>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct AllowList {
    prefixes: Vec<Prefix>,
}

/// An `--allow-prometheus` URL that cannot be a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowListError {
    /// The URL as given.
    pub url: String,
    /// Why it was refused.
    pub reason: &'static str,
}

impl fmt::Display for AllowListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "allowed Prometheus URL {:?}: {}", self.url, self.reason)
    }
}

impl std::error::Error for AllowListError {}

#[derive(Clone, Debug)]
struct Prefix {
    scheme: String,
    host: String,
    port: Option<u16>,
    path: String,
}

impl AllowList {
    /// Allows URLs under each of `urls`.
    ///
    /// # Errors
    ///
    /// [`AllowListError`] for a URL without an http(s) scheme or a host, with credentials, or
    /// with a path a proxy could resolve elsewhere (see the type's docs).
    pub fn new(urls: impl IntoIterator<Item = Uri>) -> Result<Self, AllowListError> {
        let prefixes = urls
            .into_iter()
            .map(|url| {
                Prefix::of(&url).map_err(|reason| AllowListError {
                    url: url.to_string(),
                    reason,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(AllowList { prefixes })
    }

    /// Whether the list is empty (every URL allowed).
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// Whether `url` may be queried.
    pub fn permits(&self, url: &Uri) -> bool {
        if self.prefixes.is_empty() {
            return true;
        }
        let Ok(url) = Prefix::of(url) else {
            return false;
        };
        self.prefixes.iter().any(|allowed| allowed.covers(&url))
    }
}

impl fmt::Display for AllowList {
    /// The allowed URLs, separated by commas; `any URL` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefixes.is_empty() {
            return f.write_str("any URL");
        }
        for (i, prefix) in self.prefixes.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}://{}", prefix.scheme, prefix.host)?;
            if let Some(port) = prefix.port {
                write!(f, ":{port}")?;
            }
            f.write_str(&prefix.path)?;
        }
        Ok(())
    }
}

impl Prefix {
    fn of(url: &Uri) -> Result<Prefix, &'static str> {
        let scheme = url
            .scheme_str()
            .ok_or("no scheme: write http:// or https://")?
            .to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return Err("the scheme must be http or https"),
        };
        let authority = url.authority().ok_or("no host")?;
        if authority.as_str().contains('@') {
            return Err("credentials in the URL are not allowed");
        }
        let host = authority.host().to_ascii_lowercase();
        let port = url.port_u16().filter(|&port| port != default_port);
        let path = url.path().trim_end_matches('/').to_owned();
        // Decoded once (`%2e`), twice (`%252e`) or as an overlong sequence (`%c0%ae`), an
        // escape can become a dot or a slash in a proxy: no base path needs one.
        if path.contains(['%', ';', '\\']) {
            return Err("a percent-encoded byte, a backslash or `;` in the path");
        }
        // `/prom/../admin` would escape its prefix wherever the path is normalised.
        if path
            .split('/')
            .any(|segment| segment == "." || segment == "..")
        {
            return Err("`.` or `..` segments in the path");
        }
        Ok(Prefix {
            scheme,
            host,
            port,
            path,
        })
    }

    fn covers(&self, url: &Prefix) -> bool {
        self.scheme == url.scheme
            && self.host == url.host
            && self.port == url.port
            && url
                .path
                .strip_prefix(&self.path)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow() -> AllowList {
        AllowList::new(["http://prometheus:9090/prom".parse().unwrap()]).unwrap()
    }

    #[test]
    fn percent_encoding_in_a_path_is_never_allowed() {
        let allow = allow();
        assert!(allow.permits(&"http://prometheus:9090/prom/team-a".parse().unwrap()));
        for path in [
            // A dot, a slash, a backslash, encoded once...
            "/prom/%2e%2e/admin",
            "/prom/%2E%2E/admin",
            "/prom/..%2fadmin",
            "/prom/..%5cadmin",
            // ...twice (a proxy that decodes once more than the allow-list)...
            "/prom/%252e%252e/admin",
            "/prom/%252E%252E/admin",
            "/prom/%25252e/admin",
            "/prom/..%252fadmin",
            // ...as overlong UTF-8, and any other escape.
            "/prom/%c0%ae%c0%ae/admin",
            "/prom/%00",
            "/prom/%41",
            "/prom%2fadmin",
            // And the rest of the rule.
            "/prom/../admin",
            "/prom/./x",
            "/prom/x;y",
            "/prom\\..\\admin",
        ] {
            // `http::Uri` refuses a backslash itself.
            let Ok(url) = format!("http://prometheus:9090{path}").parse::<Uri>() else {
                assert!(path.contains('\\'), "{path}");
                continue;
            };
            assert!(!allow.permits(&url), "{path}");
        }
        for allowed in ["http://p:9090/a%2e", "http://p:9090/%252e"] {
            assert!(
                AllowList::new([allowed.parse().unwrap()]).is_err(),
                "{allowed}"
            );
        }
    }

    #[test]
    fn the_list_shows_as_its_urls() {
        assert_eq!(allow().to_string(), "http://prometheus:9090/prom");
        let two = AllowList::new([
            "https://a:443/".parse().unwrap(),
            "http://B:80/x".parse().unwrap(),
        ])
        .unwrap();
        assert_eq!(two.to_string(), "https://a, http://b/x");
        assert_eq!(AllowList::default().to_string(), "any URL");
    }
}

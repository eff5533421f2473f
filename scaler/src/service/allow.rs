//! Which Prometheus servers triggers may point the scaler at.

use std::fmt;

use http::Uri;

/// The Prometheus base URLs triggers may use (`--allow-prometheus`): a trigger's
/// `prometheusURL` must have an allowed URL's scheme, host and port, and its path must start
/// with the allowed path at a `/` boundary, without `.` or `..` segments. Empty allows every
/// URL.
///
/// ```
/// use admit_scaler::service::AllowList;
///
/// let allow = AllowList::new(["http://prometheus.monitoring:9090/prom".parse()?]);
/// assert!(allow.permits(&"http://prometheus.monitoring:9090/prom".parse()?));
/// assert!(allow.permits(&"http://PROMETHEUS.monitoring:9090/prom/team-a".parse()?));
/// assert!(!allow.permits(&"http://prometheus.monitoring:9090/prometheus".parse()?));
/// assert!(!allow.permits(&"https://prometheus.monitoring:9090/prom".parse()?));
/// assert!(!allow.permits(&"http://metadata.internal/prom".parse()?));
/// assert!(!allow.permits(&"http://prometheus.monitoring:9090/prom/../admin".parse()?));
/// assert!(AllowList::default().permits(&"http://anything:1234".parse()?));
/// # Ok::<(), http::uri::InvalidUri>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct AllowList {
    prefixes: Vec<Prefix>,
}

#[derive(Clone, Debug)]
struct Prefix {
    scheme: String,
    host: String,
    port: Option<u16>,
    path: String,
}

impl AllowList {
    /// Allows URLs under each of `urls`.
    pub fn new(urls: impl IntoIterator<Item = Uri>) -> Self {
        AllowList {
            prefixes: urls
                .into_iter()
                .filter_map(|url| Prefix::of(&url))
                .collect(),
        }
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
        let Some(url) = Prefix::of(url) else {
            return false;
        };
        self.prefixes.iter().any(|allowed| allowed.covers(&url))
    }
}

impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
    fn of(url: &Uri) -> Option<Prefix> {
        let scheme = url.scheme_str()?.to_ascii_lowercase();
        let host = url.host()?.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let port = url.port_u16().filter(|&port| port != default_port);
        let path = url.path().trim_end_matches('/').to_owned();
        // `/prom/../admin` would escape its prefix wherever the path is normalised.
        let dot_segment = path.split('/').any(|segment| {
            let segment = segment.to_ascii_lowercase().replace("%2e", ".");
            segment == "." || segment == ".."
        });
        if dot_segment {
            return None;
        }
        Some(Prefix {
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

//! [`HaproxyConfig`], what a launch asks for, and the configuration file made of it.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::{PROXY_ERROR_HEADER, REQUEST_START_HEADER};

/// The frontend's name in the configuration, and so in HAProxy's logs and statistics.
pub(super) const FRONTEND: &str = "front";

/// How long a soft stop (SIGUSR1) waits for open connections before HAProxy closes them:
/// shorter than the kit's 10 s wait before SIGKILL.
const HARD_STOP_AFTER: &str = "5s";

/// The error responses HAProxy makes itself that carry the [`PROXY_ERROR_HEADER`]: their status,
/// reason phrase and message, those of HAProxy's default pages.
const PROXY_ERRORS: [(u16, &str, &str); 4] = [
    (
        500,
        "Internal Server Error",
        "An internal server error occurred.",
    ),
    (
        502,
        "Bad Gateway",
        "The server returned an invalid or incomplete response.",
    ),
    (
        503,
        "Service Unavailable",
        "No server is available to handle this request.",
    ),
    (
        504,
        "Gateway Time-out",
        "The server didn't respond in time.",
    ),
];

/// What [`launch`](fn@super::launch) sets up: an HTTP frontend on a free loopback port that sends
/// every request to one backend, whose servers are added at runtime.
///
/// Build one from [`Default`]: `HaproxyConfig { check_interval: …, ..HaproxyConfig::default() }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaproxyConfig {
    /// The backend's name, which the runtime API's commands use: letters, digits, `-`, `_`,
    /// `.` and `:`, and not `front` (the frontend's). Default `replicas`.
    pub backend: String,
    /// The path of each server's readiness endpoint: the health check is `GET <path>`
    /// (HTTP/1.1, `Host: localhost`) and passes on status 200 only. Default `/readyz`.
    pub health_path: String,
    /// How often each server is checked (`inter`), in whole milliseconds (at least 1 ms).
    /// Default 1 s.
    pub check_interval: Duration,
    /// How many passed checks in a row bring a DOWN server UP (`rise`, at least 1). Default 2,
    /// HAProxy's.
    pub rise: u32,
    /// How many failed checks in a row take an UP server DOWN (`fall`, at least 1). Default 3,
    /// HAProxy's.
    pub fall: u32,
    /// The limits on each stage of a request and of a check.
    pub timeouts: Timeouts,
    /// Whether the frontend stamps each request with [`REQUEST_START_HEADER`]
    /// (`X-Request-Start: t=<µs since the epoch>`), replacing any the client sent. Default on.
    pub request_start: bool,
    /// How many times a request whose connection to a server failed is tried again, each time
    /// on another server if there is one (`retries`, `retry-on conn-failure`,
    /// `option redispatch 1`); 0 tries nothing again (`retry-on none`). Only connection
    /// failures are retried: never a request a server has received, nor a response it sent
    /// (its 503s pass through). Default 3, HAProxy's.
    pub retries: u32,
    /// How the backend picks a server for each request. Default [`Balance::RoundRobin`].
    pub balance: Balance,
    /// Whether HAProxy writes a line per request (`option httplog`) to its log, beside its
    /// alerts and server state changes. Default off.
    pub access_log: bool,
    /// Directives added to the frontend after its `X-Request-Start` stamp, one a line, such
    /// as `http-request del-header admit-criticality`. Default none.
    pub frontend_rules: Vec<String>,
}

impl Default for HaproxyConfig {
    fn default() -> Self {
        HaproxyConfig {
            backend: "replicas".to_owned(),
            health_path: "/readyz".to_owned(),
            check_interval: Duration::from_secs(1),
            rise: 2,
            fall: 3,
            timeouts: Timeouts::default(),
            request_start: true,
            retries: 3,
            balance: Balance::RoundRobin,
            access_log: false,
            frontend_rules: Vec::new(),
        }
    }
}

/// HAProxy's timeouts, each in whole milliseconds (at least 1 ms: HAProxy reads 0 as no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// How long a connection to a server may take to be established (`timeout connect`), also
    /// how long a request may wait for a server. Default 5 s.
    pub connect: Duration,
    /// How long a client may be silent while it is expected to send (`timeout client`),
    /// including between requests on a kept-alive connection. Default 30 s.
    pub client: Duration,
    /// How long a server may be silent while it is expected to answer (`timeout server`).
    /// Default 30 s.
    pub server: Duration,
    /// How long a health check may wait for its answer once connected (`timeout check`).
    /// Default 2 s.
    pub check: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            client: Duration::from_secs(30),
            server: Duration::from_secs(30),
            check: Duration::from_secs(2),
        }
    }
}

/// How the backend picks a server: both are dynamic algorithms, which servers added at runtime
/// need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    /// Each server in turn (`balance roundrobin`).
    RoundRobin,
    /// The server with the fewest requests in flight (`balance leastconn`).
    LeastConn,
}

impl HaproxyConfig {
    /// Why HAProxy would refuse this configuration, or misread it, if it would.
    pub(super) fn check(&self) -> Result<(), String> {
        if !is_name(&self.backend) {
            return Err(format!(
                "the backend name {:?} is not letters, digits, '-', '_', '.' and ':'",
                self.backend
            ));
        }
        if self.backend == FRONTEND {
            return Err(format!(
                "the backend may not be named {FRONTEND:?}, as the frontend is"
            ));
        }
        let path_ok = self.health_path.starts_with('/')
            && self
                .health_path
                .bytes()
                .all(|byte| byte.is_ascii_graphic() && !b"#'\"\\$".contains(&byte));
        if !path_ok {
            return Err(format!(
                "the health-check path {:?} does not start with '/' or has spaces, control \
                 characters or any of # ' \" \\ $",
                self.health_path
            ));
        }
        if let Some(rule) = self
            .frontend_rules
            .iter()
            .find(|rule| rule.contains(['\n', '\r']))
        {
            return Err(format!("the frontend rule {rule:?} spans lines"));
        }
        if self.rise == 0 || self.fall == 0 {
            return Err(format!(
                "rise ({}) and fall ({}) must be at least 1",
                self.rise, self.fall
            ));
        }
        Ok(())
    }

    /// The `check …` arguments of `add server` for a server of this backend: dynamic servers
    /// take nothing from a `default-server` line.
    pub(super) fn check_args(&self) -> String {
        format!(
            "check inter {} rise {} fall {}",
            millis(self.check_interval),
            self.rise,
            self.fall
        )
    }

    /// The configuration file for a frontend on `frontend` and the runtime API on the Unix
    /// socket `socket`.
    pub(super) fn render(&self, frontend: SocketAddr, socket: &Path) -> Result<String, String> {
        let socket = socket
            .to_str()
            .ok_or_else(|| format!("the socket path {socket:?} is not UTF-8"))?;
        let Timeouts {
            connect,
            client,
            server,
            check,
        } = self.timeouts;
        let backend = &self.backend;
        let mut lines: Vec<String> = vec![
            "global".to_owned(),
            format!("    stats socket {} mode 600 level admin", quote(socket)),
            "    stats timeout 10s".to_owned(),
            format!("    hard-stop-after {HARD_STOP_AFTER}"),
            // A port another process holds makes the bind fail, and the start is tried again
            // on another, instead of two processes sharing it.
            "    noreuseport".to_owned(),
        ];
        if self.access_log {
            lines.push("    log stderr format raw local0 info".to_owned());
        }
        lines.extend([
            "".to_owned(),
            "defaults".to_owned(),
            "    mode http".to_owned(),
        ]);
        if self.access_log {
            for option in ["log global", "option httplog", "option dontlognull"] {
                lines.push(format!("    {option}"));
            }
        }
        for (name, limit) in [
            ("connect", connect),
            ("client", client),
            ("server", server),
            ("check", check),
        ] {
            lines.push(format!("    timeout {name} {}", millis(limit)));
        }
        for (status, reason, message) in PROXY_ERRORS {
            lines.push(format!(
                "    http-error status {status} content-type text/html string \
                 \"<html><body><h1>{status} {reason}</h1>\\n{message}\\n</body></html>\\n\" \
                 hdr {PROXY_ERROR_HEADER} {status}"
            ));
        }
        lines.extend([
            String::new(),
            format!("frontend {FRONTEND}"),
            format!("    bind {frontend}"),
        ]);
        if self.request_start {
            lines.push(format!(
                "    http-request set-header {REQUEST_START_HEADER} t=%[date(0,us)]"
            ));
        }
        for rule in &self.frontend_rules {
            lines.push(format!("    {rule}"));
        }
        let balance = match self.balance {
            Balance::RoundRobin => "roundrobin",
            Balance::LeastConn => "leastconn",
        };
        lines.extend([
            format!("    default_backend {backend}"),
            String::new(),
            format!("backend {backend}"),
            format!("    balance {balance}"),
            "    option httpchk".to_owned(),
            format!(
                "    http-check send meth GET uri {} ver HTTP/1.1 hdr Host localhost",
                self.health_path
            ),
            "    http-check expect status 200".to_owned(),
            format!("    retries {}", self.retries),
        ]);
        if self.retries == 0 {
            lines.push("    retry-on none".to_owned());
        } else {
            lines.push("    retry-on conn-failure".to_owned());
            lines.push("    option redispatch 1".to_owned());
        }
        let mut text = lines.join("\n");
        text.push('\n');
        Ok(text)
    }
}

/// Whether HAProxy takes `name` as a proxy or server name, and the runtime API's commands
/// cannot be split by it: letters, digits, `-`, `_`, `.` and `:`, not empty.
pub(super) fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-_.:".contains(&byte))
}

/// A duration in HAProxy's syntax, in whole milliseconds, at least 1 ms.
fn millis(duration: Duration) -> String {
    format!("{}ms", duration.as_millis().max(1))
}

/// `text` in double quotes, with the characters HAProxy interprets there escaped.
fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for char in text.chars() {
        if matches!(char, '"' | '\\' | '$') {
            quoted.push('\\');
        }
        quoted.push(char);
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frontend() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 18080))
    }

    #[test]
    fn the_default_configuration() {
        let config = HaproxyConfig::default();
        assert_eq!(config.check(), Ok(()));
        let text = config
            .render(frontend(), Path::new("/tmp/x/admin.sock"))
            .expect("rendered");
        let expected = "\
global
    stats socket \"/tmp/x/admin.sock\" mode 600 level admin
    stats timeout 10s
    hard-stop-after 5s
    noreuseport

defaults
    mode http
    timeout connect 5000ms
    timeout client 30000ms
    timeout server 30000ms
    timeout check 2000ms
    http-error status 500 content-type text/html string \"<html><body><h1>500 Internal Server Error</h1>\\nAn internal server error occurred.\\n</body></html>\\n\" hdr x-haproxy-error 500
    http-error status 502 content-type text/html string \"<html><body><h1>502 Bad Gateway</h1>\\nThe server returned an invalid or incomplete response.\\n</body></html>\\n\" hdr x-haproxy-error 502
    http-error status 503 content-type text/html string \"<html><body><h1>503 Service Unavailable</h1>\\nNo server is available to handle this request.\\n</body></html>\\n\" hdr x-haproxy-error 503
    http-error status 504 content-type text/html string \"<html><body><h1>504 Gateway Time-out</h1>\\nThe server didn't respond in time.\\n</body></html>\\n\" hdr x-haproxy-error 504

frontend front
    bind 127.0.0.1:18080
    http-request set-header x-request-start t=%[date(0,us)]
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost
    http-check expect status 200
    retries 3
    retry-on conn-failure
    option redispatch 1
";
        assert_eq!(text, expected);
        assert_eq!(config.check_args(), "check inter 1000ms rise 2 fall 3");
    }

    #[test]
    fn the_options_change_their_lines() {
        let config = HaproxyConfig {
            backend: "be.1".to_owned(),
            health_path: "/health?full=1".to_owned(),
            check_interval: Duration::ZERO,
            rise: 1,
            fall: 1,
            timeouts: Timeouts {
                connect: Duration::from_micros(10),
                ..Timeouts::default()
            },
            request_start: false,
            retries: 0,
            balance: Balance::LeastConn,
            access_log: true,
            frontend_rules: vec!["http-request del-header x-a".to_owned()],
        };
        assert_eq!(config.check(), Ok(()));
        assert_eq!(config.check_args(), "check inter 1ms rise 1 fall 1");
        let text = config
            .render(frontend(), Path::new("/tmp/a \"$b\"/admin.sock"))
            .expect("rendered");
        for present in [
            "    stats socket \"/tmp/a \\\"\\$b\\\"/admin.sock\" mode 600 level admin\n",
            "    log stderr format raw local0 info\n",
            "    option httplog\n",
            "    timeout connect 1ms\n",
            "    default_backend be.1\n",
            "backend be.1\n",
            "    balance leastconn\n",
            "uri /health?full=1 ver",
            "    retries 0\n    retry-on none\n",
            "    bind 127.0.0.1:18080\n    http-request del-header x-a\n",
        ] {
            assert!(text.contains(present), "{present:?} in\n{text}");
        }
        for absent in ["x-request-start", "redispatch", "conn-failure"] {
            assert!(!text.contains(absent), "{absent:?} in\n{text}");
        }
    }

    #[test]
    fn names_and_paths_haproxy_would_misread_are_refused() {
        let with = |change: fn(&mut HaproxyConfig)| {
            let mut config = HaproxyConfig::default();
            change(&mut config);
            config.check()
        };
        for change in [
            (|config: &mut HaproxyConfig| config.backend = String::new()) as fn(&mut _),
            |config| config.backend = "two words".to_owned(),
            |config| config.backend = "a;b".to_owned(),
            |config| config.backend = FRONTEND.to_owned(),
            |config| config.health_path = "readyz".to_owned(),
            |config| config.health_path = "/ready z".to_owned(),
            |config| config.health_path = "/ready#z".to_owned(),
            |config| config.health_path = "/é".to_owned(),
            |config| config.rise = 0,
            |config| config.fall = 0,
            |config| config.frontend_rules = vec!["a\nb".to_owned()],
        ] {
            assert!(with(change).is_err(), "{:?}", with(change));
        }
        assert!(is_name("Replica-1_a.b:c"));
        assert!(!is_name("r/1"));
    }
}

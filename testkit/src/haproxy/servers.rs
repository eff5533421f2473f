//! The backend's servers through the runtime API: adding, draining, taking out and removing
//! them, and reading their state and sessions from `show stat`.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use super::api::quote;
use super::config::is_name;
use super::{ApiError, Haproxy};

/// How long [`Haproxy::remove`] waits for a server's connections to end.
pub const REMOVE_LIMIT: Duration = Duration::from_secs(30);

/// How often the bounded waits ask HAProxy again.
const POLL: Duration = Duration::from_millis(25);

/// What [`Haproxy::add_server`] allows for its first health check beyond the check interval,
/// the connect timeout and the check timeout.
const FIRST_CHECK_SLACK: Duration = Duration::from_secs(5);

/// HAProxy's answers to the commands that succeed with words.
const ADDED: &str = "New server registered.";
const DELETED: &str = "Server deleted.";
const STILL_CONNECTED: &str = "Server still has connections attached to it";

/// A server's operational state, from the `status` column of `show stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Sent requests: its checks pass (`UP`, also `UP 1/3` while failing checks count towards
    /// `fall`, and `no check` for a server without checks).
    Up,
    /// Its checks fail (`DOWN`, also `DOWN 1/2` while passing checks count towards `rise`).
    Down,
    /// In maintenance: sent no requests and not checked (`MAINT`, `MAINT (via …)`), as a
    /// server is right after `add server`.
    Maint,
    /// UP but sent no new requests (`DRAIN`, and `NOLB`, a server that asked for it); requests
    /// in flight finish. A drained server whose checks fail is [`Down`](State::Down).
    Drain,
}

/// One server of the backend, as `show stat` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Its name in the backend.
    pub name: String,
    /// Where HAProxy sends its requests and checks.
    pub addr: SocketAddr,
    /// Its operational state.
    pub state: State,
    /// HAProxy's own words for it, such as `UP`, `DOWN 1/2` or `MAINT`.
    pub status: String,
    /// The last health check's status: `L7OK` (passed), `L7STS` (a status other than 200),
    /// `L4CON` (connection refused), `INI` before the first check; empty in maintenance.
    pub check_status: String,
    /// The last health check's HTTP status, if it had one.
    pub check_code: Option<u16>,
    /// Requests being served by it (`scur`).
    pub current_sessions: u64,
    /// Requests it has been sent since it was added (`stot`).
    pub total_sessions: u64,
    /// Connections to it that failed (`econ`).
    pub connection_errors: u64,
    /// Requests sent elsewhere after a connection to it failed (`wredis`).
    pub redispatches: u64,
}

impl Haproxy {
    /// The backend's servers, in the order they were added.
    ///
    /// # Errors
    ///
    /// [`ApiError::Io`] if the runtime API cannot be reached or does not answer within
    /// [`NET_TIMEOUT`](crate::wait::NET_TIMEOUT); [`ApiError::Refused`] or
    /// [`ApiError::Unexpected`] for an answer that is not the backend's statistics.
    pub async fn servers(&self) -> Result<Vec<Server>, ApiError> {
        // Type 4: servers only; -1: all of them.
        let command = format!("show stat {} 4 -1", self.config.backend);
        let answer = self.command(&command).await?;
        parse_stat(&answer).map_err(|why| {
            if answer.starts_with("# ") {
                ApiError::Unexpected {
                    command,
                    answer: format!("{why}: {}", quote(&answer)),
                }
            } else {
                ApiError::Refused {
                    command,
                    answer: quote(&answer),
                }
            }
        })
    }

    /// The server `name`, from [`servers`](Haproxy::servers).
    ///
    /// # Errors
    ///
    /// As [`servers`](Haproxy::servers); [`ApiError::NoSuchServer`] if there is none of that
    /// name.
    pub async fn server(&self, name: &str) -> Result<Server, ApiError> {
        self.servers()
            .await?
            .into_iter()
            .find(|server| server.name == name)
            .ok_or_else(|| ApiError::NoSuchServer(name.to_owned()))
    }

    /// Adds the server `name` at `addr` to the backend, health-checked as the
    /// [`HaproxyConfig`](super::HaproxyConfig) says, and returns it once its first health check
    /// is done: [`State::Up`] if the check passed, and from then on sent requests;
    /// [`State::Down`] if it failed, and sent none until `rise` checks in a row pass.
    ///
    /// HAProxy makes a server UP as soon as it leaves maintenance, before any check, so the
    /// server is drained (`add server … check`, `enable health`, `set server … state drain`)
    /// until its first check has run, one check interval later, and only then made ready
    /// (`set server … state ready`).
    ///
    /// # Errors
    ///
    /// [`ApiError::InvalidName`] for a name HAProxy would refuse; [`ApiError::Refused`] if
    /// HAProxy refuses a command, such as `add server` for a name already taken;
    /// [`ApiError::Timeout`] if the first check has not run within twice the check interval
    /// plus the connect and check timeouts and 5 s; as [`servers`](Haproxy::servers). A server
    /// that was added before the failure is removed again, if HAProxy lets it.
    pub async fn add_server(&self, name: &str, addr: SocketAddr) -> Result<Server, ApiError> {
        let server = self.server_path(name)?;
        let add = format!("add server {server} {addr} {}", self.config.check_args());
        let answer = self.command(&add).await?;
        if answer.trim() != ADDED {
            return Err(ApiError::Refused {
                command: add,
                answer: quote(&answer),
            });
        }
        let added = self.enable_checked(name, &server).await;
        if added.is_err() {
            // Best effort: the error says what went wrong, not whether this cleaned up.
            let _ = self
                .command(&format!("set server {server} state maint"))
                .await;
            let _ = self.command(&format!("del server {server}")).await;
        }
        added
    }

    /// The steps of [`add_server`](Haproxy::add_server) after `add server`.
    async fn enable_checked(&self, name: &str, server: &str) -> Result<Server, ApiError> {
        self.silent(format!("enable health {server}")).await?;
        self.silent(format!("set server {server} state drain"))
            .await?;
        let config = &self.config;
        let limit = config.check_interval * 2
            + config.timeouts.connect
            + config.timeouts.check
            + FIRST_CHECK_SLACK;
        self.wait_until(name, "first health check", limit, |server| {
            server.check_status != "INI"
        })
        .await?;
        self.silent(format!("set server {server} state ready"))
            .await?;
        self.server(name).await
    }

    /// Drains the server `name` (`set server … state drain`): it is sent no new requests, and
    /// those in flight finish. Its checks go on.
    ///
    /// # Errors
    ///
    /// [`ApiError::InvalidName`]; [`ApiError::Refused`] with "No such server." for an unknown
    /// server; [`ApiError::Io`] as for [`servers`](Haproxy::servers).
    pub async fn drain(&self, name: &str) -> Result<(), ApiError> {
        self.set_state(name, "drain").await
    }

    /// Puts the server `name` in maintenance (`set server … state maint`): it is sent no new
    /// requests and not checked; requests in flight finish.
    ///
    /// # Errors
    ///
    /// As [`drain`](Haproxy::drain).
    pub async fn maint(&self, name: &str) -> Result<(), ApiError> {
        self.set_state(name, "maint").await
    }

    /// Makes the server `name` ready again after [`drain`](Haproxy::drain) or
    /// [`maint`](Haproxy::maint) (`set server … state ready`). Leaving maintenance makes it UP
    /// at once, before its next check.
    ///
    /// # Errors
    ///
    /// As [`drain`](Haproxy::drain).
    pub async fn ready(&self, name: &str) -> Result<(), ApiError> {
        self.set_state(name, "ready").await
    }

    async fn set_state(&self, name: &str, state: &str) -> Result<(), ApiError> {
        let server = self.server_path(name)?;
        self.silent(format!("set server {server} state {state}"))
            .await
    }

    /// Removes the server `name`: puts it in maintenance, then asks `del server` every 25 ms
    /// until HAProxy deletes it, which it does once the server has no connections left: the
    /// requests in flight finish first. Drain it beforehand to let them finish while the
    /// server is still checked.
    ///
    /// # Errors
    ///
    /// As [`drain`](Haproxy::drain); [`ApiError::Timeout`], with HAProxy's last answer, if the
    /// server still has connections after [`REMOVE_LIMIT`]; it stays in maintenance then.
    pub async fn remove(&self, name: &str) -> Result<(), ApiError> {
        let server = self.server_path(name)?;
        self.silent(format!("set server {server} state maint"))
            .await?;
        let command = format!("del server {server}");
        let deadline = Instant::now() + REMOVE_LIMIT;
        loop {
            let answer = self.command(&command).await?;
            let answer = answer.trim();
            if answer == DELETED {
                return Ok(());
            }
            if !answer.starts_with(STILL_CONNECTED) {
                return Err(ApiError::Refused {
                    command,
                    answer: quote(answer),
                });
            }
            if Instant::now() >= deadline {
                return Err(ApiError::Timeout {
                    server: name.to_owned(),
                    waiting_for: "end of its connections".to_owned(),
                    limit: REMOVE_LIMIT,
                    last: quote(answer),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Asks every 25 ms until the server `name` is in `state`, and returns it then.
    ///
    /// # Errors
    ///
    /// [`ApiError::Timeout`], with the server's last row, if it is not in `state` within
    /// `limit`; as [`server`](Haproxy::server).
    pub async fn wait_for_state(
        &self,
        name: &str,
        state: State,
        limit: Duration,
    ) -> Result<Server, ApiError> {
        self.wait_until(name, &format!("state {state:?}"), limit, |server| {
            server.state == state
        })
        .await
    }

    /// Asks every 25 ms until `accept` holds for the server `name`, within `limit`.
    async fn wait_until(
        &self,
        name: &str,
        waiting_for: &str,
        limit: Duration,
        mut accept: impl FnMut(&Server) -> bool,
    ) -> Result<Server, ApiError> {
        let deadline = Instant::now() + limit;
        loop {
            let server = self.server(name).await?;
            if accept(&server) {
                return Ok(server);
            }
            if Instant::now() >= deadline {
                return Err(ApiError::Timeout {
                    server: name.to_owned(),
                    waiting_for: waiting_for.to_owned(),
                    limit,
                    last: format!("{server:?}"),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// `<backend>/<name>`, for a name HAProxy takes.
    fn server_path(&self, name: &str) -> Result<String, ApiError> {
        if !is_name(name) {
            return Err(ApiError::InvalidName(name.to_owned()));
        }
        Ok(format!("{}/{name}", self.config.backend))
    }

    /// Sends a command that answers nothing when it succeeds.
    async fn silent(&self, command: String) -> Result<(), ApiError> {
        let answer = self.command(&command).await?;
        if answer.trim().is_empty() {
            Ok(())
        } else {
            Err(ApiError::Refused {
                command,
                answer: quote(&answer),
            })
        }
    }
}

/// The servers in `show stat` CSV: a header line `# pxname,svname,…`, then a line per server.
fn parse_stat(answer: &str) -> Result<Vec<Server>, String> {
    let mut lines = answer.lines();
    let header = lines
        .next()
        .and_then(|line| line.strip_prefix("# "))
        .ok_or("no `# pxname,…` header line")?;
    let header = csv_fields(header);
    let column = |name: &str| {
        header
            .iter()
            .position(|field| field == name)
            .ok_or_else(|| format!("no `{name}` column"))
    };
    let [
        name,
        addr,
        status,
        check_status,
        check_code,
        scur,
        stot,
        econ,
        wredis,
    ] = [
        "svname",
        "addr",
        "status",
        "check_status",
        "check_code",
        "scur",
        "stot",
        "econ",
        "wredis",
    ]
    .map(column);
    let (name, addr, status, check_status, check_code) =
        (name?, addr?, status?, check_status?, check_code?);
    let (scur, stot, econ, wredis) = (scur?, stot?, econ?, wredis?);
    let mut servers = Vec::new();
    for line in lines.filter(|line| !line.is_empty()) {
        let fields = csv_fields(line);
        let field = |index: usize| {
            fields
                .get(index)
                .map(String::as_str)
                .ok_or_else(|| format!("a short line {line:?}"))
        };
        let count = |index: usize| -> Result<u64, String> {
            let value = field(index)?;
            // HAProxy leaves a counter empty where it does not apply.
            if value.is_empty() {
                return Ok(0);
            }
            value
                .parse()
                .map_err(|_| format!("a count {value:?} in {line:?}"))
        };
        let status = field(status)?.to_owned();
        let check_status = field(check_status)?;
        let check_code = field(check_code)?;
        servers.push(Server {
            name: field(name)?.to_owned(),
            addr: field(addr)?
                .parse()
                .map_err(|_| format!("an address {:?}", field(addr)))?,
            state: parse_state(&status).ok_or_else(|| format!("a status {status:?}"))?,
            status,
            // `* ` marks a check in progress; the status is the last one's.
            check_status: check_status.trim_start_matches("* ").to_owned(),
            check_code: check_code.parse().ok(),
            current_sessions: count(scur)?,
            total_sessions: count(stot)?,
            connection_errors: count(econ)?,
            redispatches: count(wredis)?,
        });
    }
    Ok(servers)
}

/// The [`State`] of a `status` column, by its first word.
fn parse_state(status: &str) -> Option<State> {
    if status == "no check" {
        return Some(State::Up);
    }
    match status.split(' ').next()? {
        "UP" => Some(State::Up),
        "DOWN" => Some(State::Down),
        "MAINT" => Some(State::Maint),
        "DRAIN" | "NOLB" => Some(State::Drain),
        _ => None,
    }
}

/// The fields of a CSV line as HAProxy writes it: commas between fields, double quotes around
/// a field with a comma or a quote, and a quote in it doubled.
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(char) = chars.next() {
        match (char, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut field)),
            (char, _) => field.push(char),
        }
    }
    fields.push(field);
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The start of `show stat` as HAProxy 2.6 writes it, to the `addr` column (most cut).
    const HEADER: &str = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,\
        ereq,econ,eresp,wretr,wredis,status,weight,act,bck,chkfail,chkdown,lastchg,downtime,\
        qlimit,pid,iid,sid,throttle,lbtot,tracked,type,rate,rate_lim,rate_max,check_status,\
        check_code,check_duration,last_chk,addr,cookie,-,\n";

    fn row(name: &str, status: &str, check: &str, code: &str) -> String {
        format!(
            "replicas,{name},0,0,1,2,,7,100,200,,0,,3,0,0,2,{status},1,1,0,0,0,5,0,,1,3,1,,7,,2,\
             0,,1,{check},{code},1,\"HTTP status check returned code <3C>503<3E>, \"\"x\"\"\",\
             127.0.0.1:18601,,,\n"
        )
    }

    #[test]
    fn show_stat_rows_become_servers() {
        let answer = format!(
            "{HEADER}{}{}{}\n",
            row("r1", "UP", "L7OK", "200"),
            row("r2", "DOWN 1/2", "* L7STS", "503"),
            row("r3", "MAINT", "", ""),
        );
        let servers = parse_stat(&answer).expect("parsed");
        let r1 = Server {
            name: "r1".to_owned(),
            addr: SocketAddr::from(([127, 0, 0, 1], 18601)),
            state: State::Up,
            status: "UP".to_owned(),
            check_status: "L7OK".to_owned(),
            check_code: Some(200),
            current_sessions: 1,
            total_sessions: 7,
            connection_errors: 3,
            redispatches: 2,
        };
        assert_eq!(servers[0], r1);
        assert_eq!(servers[1].state, State::Down);
        assert_eq!(servers[1].status, "DOWN 1/2");
        assert_eq!(servers[1].check_status, "L7STS");
        assert_eq!(servers[1].check_code, Some(503));
        assert_eq!(servers[2].state, State::Maint);
        assert_eq!(servers[2].check_status, "");
        assert_eq!(servers[2].check_code, None);
        assert_eq!(servers.len(), 3);
        assert_eq!(parse_stat(HEADER), Ok(vec![]));
    }

    #[test]
    fn answers_that_are_not_statistics_are_errors() {
        assert!(parse_stat("No such proxy.\n\n").is_err());
        assert_eq!(
            parse_stat("# pxname,svname\nreplicas,r1\n"),
            Err("no `addr` column".to_owned())
        );
        let odd = format!("{HEADER}{}", row("r1", "SOMETHING", "L7OK", "200"));
        assert_eq!(parse_stat(&odd), Err("a status \"SOMETHING\"".to_owned()));
    }

    #[test]
    fn states_by_their_first_word() {
        for (status, state) in [
            ("UP", Some(State::Up)),
            ("UP 1/3", Some(State::Up)),
            ("no check", Some(State::Up)),
            ("DOWN", Some(State::Down)),
            ("DOWN (agent)", Some(State::Down)),
            ("MAINT", Some(State::Maint)),
            ("MAINT (via replicas/r1)", Some(State::Maint)),
            ("DRAIN", Some(State::Drain)),
            ("DRAIN 1/3", Some(State::Drain)),
            ("NOLB", Some(State::Drain)),
            ("no", None),
            ("no checks", None),
            ("", None),
        ] {
            assert_eq!(parse_state(status), state, "{status:?}");
        }
    }

    #[test]
    fn csv_fields_keep_quoted_commas_and_quotes() {
        assert_eq!(
            csv_fields("a,,\"b, \"\"c\"\"\",d"),
            ["a", "", "b, \"c\"", "d"]
        );
        assert_eq!(csv_fields(""), [""]);
    }
}

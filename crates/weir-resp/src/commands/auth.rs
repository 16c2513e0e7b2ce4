//! `AUTH [username] password` and the check `HELLO … AUTH username password` shares: with
//! a password configured (`--resp-password-file`), the one user is `default` and the
//! password is compared in constant time (`weir_listen::AdminToken`, never printed). A
//! wrong one is answered Redis's `-WRONGPASS …` only after [`WRONG_PASSWORD_DELAY`], one
//! wrong password at a time server-wide, so guessing runs at most 10 tries a second
//! however many connections try; a right one is never delayed. Without a password, Redis's
//! answers for its default user without one.

use std::time::Duration;

use bytes::Bytes;

use super::Session;
use super::Shared;
use crate::protocol::Reply;

/// How long each wrong password holds the server-wide gate.
pub(crate) const WRONG_PASSWORD_DELAY: Duration = Duration::from_millis(100);

/// Redis's answer to a wrong user or password.
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// `AUTH [username] password`.
pub(crate) async fn auth(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Reply {
    let (user, password) = match args {
        [_, password] => (None, password),
        [_, user, password] => (Some(user), password),
        _ => return Reply::error("ERR syntax error"),
    };
    if shared.settings.password.is_none() {
        return match user {
            // The default user has no password: any password is right for it.
            Some(user) if user.as_ref() == b"default" => Reply::OK,
            Some(_) => Reply::error(WRONGPASS),
            None => Reply::error(
                "ERR AUTH <password> called without any password configured for the default \
                 user. Are you sure your configuration is correct?",
            ),
        };
    }
    match verify(shared, session, user.map(AsRef::as_ref), password).await {
        Ok(()) => Reply::OK,
        Err(reply) => reply,
    }
}

/// Checks `user` (`default` when `None`) and `password` against the configured password:
/// authenticates the session, or answers `-WRONGPASS` after the delay. Without a
/// configured password any credentials are accepted (as Redis's default user without one).
pub(crate) async fn verify(
    shared: &Shared,
    session: &mut Session,
    user: Option<&[u8]>,
    password: &[u8],
) -> Result<(), Reply> {
    let Some(expected) = &shared.settings.password else {
        return Ok(());
    };
    // Both compared whatever the user, so the time taken does not say which was wrong.
    let right_password = expected.matches(password);
    let right_user = user.is_none_or(|u| u == b"default");
    if right_password && right_user {
        session.authenticated = true;
        return Ok(());
    }
    session.failed_auths = session.failed_auths.saturating_add(1);
    tracing::debug!(
        connection = session.id,
        failures = session.failed_auths,
        "RESP: wrong user or password"
    );
    shared.stats.count_failed_auth();
    let _one_at_a_time = shared.auth_gate.lock().await;
    tokio::time::sleep(WRONG_PASSWORD_DELAY).await;
    Err(Reply::error(WRONGPASS))
}

/// What a command meets before `AUTH` when a password is required.
pub(crate) fn noauth() -> Reply {
    Reply::error("NOAUTH Authentication required.")
}

/// `HELLO` without `AUTH` before the connection authenticated: Redis's words.
pub(crate) fn hello_noauth() -> Reply {
    Reply::error(
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
         HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
         select the RESP protocol version at the same time",
    )
}

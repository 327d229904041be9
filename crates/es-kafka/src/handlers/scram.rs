//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554), as
//! Kafka 4's broker and controller answer them.
//!
//! Credentials are kept in the metadata log (one entry per Alter), salted:
//! the broker that receives an upsertion turns the client's SaltedPassword
//! into StoredKey and ServerKey, so neither a password nor anything that
//! authenticates as the user reaches the log. Describe lists mechanisms
//! and iterations only. Describe needs DESCRIBE on the cluster, Alter needs
//! ALTER, when an authorizer is configured.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use es_auth::acl::AclOperation;
use es_auth::scram::{
    validate_name_and_mechanism, validate_upsertion, AlterCredentialError, ScramCredential,
    ScramMechanism,
};
use es_meta::records::{MetaRequest, MetaResponse, ScramKey, ScramUpsertion};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{Ctx, RequestError};
use crate::errors::{code, ResponseError};

const DESCRIBE_DUPLICATE_USER: &str =
    "Cannot describe SCRAM credentials for the same user twice in a single request: ";
const DESCRIBE_USER_THAT_DOES_NOT_EXIST: &str =
    "Attempt to describe a user credential that does not exist: ";
const ALTERED_TWICE: &str = "A user credential cannot be altered twice in the same request";

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub fn describe(
    ctx: &Ctx,
    req: DescribeUserScramCredentialsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let mut r = DescribeUserScramCredentialsResponse::default();
    if !ctx.allowed_on_cluster(AclOperation::Describe) {
        // Kafka answers with the error at the top and in one result for
        // the empty user name.
        let denied = code(ResponseError::ClusterAuthorizationFailed);
        r.error_code = denied;
        let mut res = DescribeUserScramCredentialsResult::default();
        res.error_code = denied;
        r.results.push(res);
        return ctx.respond(&r);
    }
    let all = ctx.broker.security().credentials.scram_all();
    let mut by_user: BTreeMap<&str, Vec<CredentialInfo>> = BTreeMap::new();
    for ((user, mech), c) in all.iter() {
        let mut info = CredentialInfo::default();
        info.mechanism = mech.type_id();
        info.iterations = i32::try_from(c.iterations).unwrap_or(i32::MAX);
        by_user.entry(user.as_str()).or_default().push(info);
    }
    // Each asked-for user once (a repeated one is an error), or all.
    let mut asked: Vec<(String, bool)> = Vec::new();
    match req.users.as_deref() {
        None | Some([]) => asked = by_user.keys().map(|u| (u.to_string(), false)).collect(),
        Some(users) => {
            for u in users {
                let name = u.name.to_string();
                match asked.iter_mut().find(|(n, _)| *n == name) {
                    Some(seen) => seen.1 = true,
                    None => asked.push((name, false)),
                }
            }
        }
    }
    for (user, duplicate) in asked {
        let mut res = DescribeUserScramCredentialsResult::default();
        if duplicate {
            res.error_code = code(ResponseError::DuplicateResource);
            res.error_message = Some(s(format!("{DESCRIBE_DUPLICATE_USER}{user}")));
        } else if let Some(infos) = by_user.get(user.as_str()) {
            res.credential_infos = infos.clone();
        } else {
            res.error_code = code(ResponseError::ResourceNotFound);
            res.error_message = Some(s(format!("{DESCRIBE_USER_THAT_DOES_NOT_EXIST}{user}")));
        }
        res.user = s(user);
        r.results.push(res);
    }
    ctx.respond(&r)
}

fn result(user: &str, error: Option<(i16, String)>) -> AlterUserScramCredentialsResult {
    let mut r = AlterUserScramCredentialsResult::default();
    r.user = s(user);
    if let Some((c, m)) = error {
        r.error_code = c;
        r.error_message = Some(s(m));
    }
    r
}

fn alter_error(e: AlterCredentialError) -> (i16, String) {
    match e {
        AlterCredentialError::UnacceptableCredential(m) => {
            (code(ResponseError::UnacceptableCredential), m.to_string())
        }
        AlterCredentialError::UnsupportedSaslMechanism(m) => {
            (code(ResponseError::UnsupportedSaslMechanism), m.to_string())
        }
    }
}

pub async fn alter(
    ctx: &Ctx,
    req: AlterUserScramCredentialsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let mut r = AlterUserScramCredentialsResponse::default();
    if !ctx.allowed_on_cluster(AclOperation::Alter) {
        let mut seen = HashSet::new();
        let users = req
            .deletions
            .iter()
            .map(|d| d.name.to_string())
            .chain(req.upsertions.iter().map(|u| u.name.to_string()));
        for u in users {
            if seen.insert(u.clone()) {
                r.results.push(result(
                    &u,
                    Some((
                        code(ResponseError::ClusterAuthorizationFailed),
                        String::new(),
                    )),
                ));
            }
        }
        return ctx.respond(&r);
    }
    // Kafka's ScramControlManager: one change per user and request; a
    // second one makes the user's result DUPLICATE_RESOURCE.
    let mut errors: Vec<(String, (i16, String))> = Vec::new();
    let mut deletions: Vec<ScramKey> = Vec::new();
    let mut upsertions: Vec<ScramUpsertion> = Vec::new();
    let errored =
        |errors: &Vec<(String, (i16, String))>, u: &str| errors.iter().any(|(n, _)| n == u);
    let duplicate = (
        code(ResponseError::DuplicateResource),
        ALTERED_TWICE.to_string(),
    );
    for d in &req.deletions {
        let user = d.name.to_string();
        if errored(&errors, &user) {
            continue;
        }
        if let Some(i) = deletions.iter().position(|x| x.user == user) {
            deletions.remove(i);
            errors.push((user, duplicate.clone()));
            continue;
        }
        match validate_name_and_mechanism(&user, d.mechanism) {
            Ok(m) => deletions.push(ScramKey {
                user,
                mechanism: m.type_id(),
            }),
            Err(e) => errors.push((user, alter_error(e))),
        }
    }
    for u in &req.upsertions {
        let user = u.name.to_string();
        if errored(&errors, &user) {
            continue;
        }
        let before = deletions.len() + upsertions.len();
        deletions.retain(|x| x.user != user);
        upsertions.retain(|x| x.user != user);
        if deletions.len() + upsertions.len() != before {
            errors.push((user, duplicate.clone()));
            continue;
        }
        let credential = validate_upsertion(&user, u.mechanism, u.iterations)
            .map_err(alter_error)
            .and_then(|m: ScramMechanism| {
                ScramCredential::from_salted_password(
                    m,
                    u.salt.to_vec(),
                    &u.salted_password,
                    u32::try_from(u.iterations).unwrap_or(0),
                )
                .map_err(|e| (code(ResponseError::UnacceptableCredential), e.to_string()))
            });
        match credential {
            Ok(credential) => upsertions.push(ScramUpsertion { user, credential }),
            Err(e) => errors.push((user, e)),
        }
    }
    if !deletions.is_empty() || !upsertions.is_empty() {
        let entry = MetaRequest::AlterScramCredentials {
            deletions: deletions.clone(),
            upsertions: upsertions.clone(),
        };
        match ctx.broker.propose(entry).await {
            Ok(MetaResponse::Items { results }) => {
                for item in results {
                    let e = (item.error_code != 0)
                        .then(|| (item.error_code, item.message.unwrap_or_default()));
                    r.results.push(result(&item.name, e));
                }
            }
            Ok(other) => {
                tracing::error!(answer = ?other, "unexpected metadata answer to AlterScramCredentials");
                for u in deletions
                    .iter()
                    .map(|d| &d.user)
                    .chain(upsertions.iter().map(|u| &u.user))
                {
                    r.results.push(result(
                        u,
                        Some((code(ResponseError::UnknownServerError), String::new())),
                    ));
                }
            }
            Err(e) => {
                for u in deletions
                    .iter()
                    .map(|d| &d.user)
                    .chain(upsertions.iter().map(|u| &u.user))
                {
                    r.results.push(result(u, Some((e.code, e.message.clone()))));
                }
            }
        }
    }
    for (user, e) in errors {
        r.results.push(result(&user, Some(e)));
    }
    ctx.respond(&r)
}

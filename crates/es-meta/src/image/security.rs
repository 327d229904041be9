//! The security state of the metadata: ACL bindings, SCRAM credentials,
//! client quotas and API keys,
//! changed by one entry per admin request so that every node enforces the
//! same, at the same index.
//!
//! The broker that received the request checked what needs no state (a
//! binding's form, a credential's iterations); what depends on the state
//! (is a binding already there, which ones does a filter match) is decided
//! here, deterministically.

use std::collections::BTreeMap;

use es_auth::acl::{AclBinding, AclBindingFilter};
use es_auth::api_keys::ApiKey;

use super::{MetaEvent, MetaImage};
use crate::quotas::{entity_text, validate_alteration, QuotaAlteration, ENTITIES_MAX};
use crate::records::{code, AclResult, ItemResult, MetaResponse, ScramKey, ScramUpsertion};

fn result(r: Result<Vec<AclBinding>, es_auth::acl::AclError>) -> AclResult {
    match r {
        Ok(bindings) => AclResult {
            error_code: 0,
            message: None,
            bindings,
        },
        Err(e) => {
            let (error_code, message) = e.pair();
            AclResult {
                error_code,
                message: message.map(str::to_string),
                bindings: Vec::new(),
            }
        }
    }
}

impl MetaImage {
    pub(super) fn create_acls(
        &mut self,
        bindings: &[AclBinding],
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        let before = self.acls.len();
        let results = self
            .acls
            .create_batch(bindings)
            .into_iter()
            .map(|r| result(r.map(|_| Vec::new())))
            .collect();
        if self.acls.len() != before {
            ev.push(MetaEvent::Acls);
        }
        MetaResponse::Acls { results }
    }

    pub(super) fn delete_acls(
        &mut self,
        filters: &[AclBindingFilter],
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        let before = self.acls.len();
        let results = self
            .acls
            .delete_batch(filters)
            .into_iter()
            .map(result)
            .collect();
        if self.acls.len() != before {
            ev.push(MetaEvent::Acls);
        }
        MetaResponse::Acls { results }
    }

    pub(super) fn alter_scram(
        &mut self,
        deletions: &[ScramKey],
        upsertions: &[ScramUpsertion],
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        // Kafka's ScramControlManager: a deletion of a credential that does
        // not exist fails for its user; the rest apply. The broker sent at
        // most one change per user.
        let mut results = Vec::with_capacity(deletions.len() + upsertions.len());
        let mut changed = false;
        for d in deletions {
            let removed = self
                .scram
                .get_mut(&d.user)
                .and_then(|m| m.remove(&d.mechanism));
            if self.scram.get(&d.user).is_some_and(BTreeMap::is_empty) {
                self.scram.remove(&d.user);
            }
            if removed.is_some() {
                changed = true;
                results.push(ItemResult::ok(&d.user));
            } else {
                results.push(ItemResult {
                    name: d.user.clone(),
                    error_code: code::RESOURCE_NOT_FOUND,
                    message: Some("Attempt to delete a user credential that does not exist".into()),
                });
            }
        }
        for u in upsertions {
            self.scram
                .entry(u.user.clone())
                .or_default()
                .insert(u.credential.mechanism.type_id(), u.credential.clone());
            changed = true;
            results.push(ItemResult::ok(&u.user));
        }
        if changed {
            ev.push(MetaEvent::ScramCredentials);
        }
        MetaResponse::Items { results }
    }

    pub(super) fn alter_client_quotas(
        &mut self,
        alterations: &[QuotaAlteration],
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        // Kafka's ClientQuotaControlManager: each entity's changes apply or
        // fail alone. The broker checked them; they are checked again here so
        // that no entry, however it was made, puts in the image what Kafka
        // would refuse.
        let mut results = Vec::with_capacity(alterations.len());
        let mut changed = false;
        for a in alterations {
            let name = entity_text(&a.entity);
            if let Err(e) = validate_alteration(a) {
                results.push(ItemResult::err(&name, e.code, e.message));
                continue;
            }
            let adds = a.ops.iter().any(|o| o.value.is_some());
            if adds
                && !self.client_quotas.0.contains_key(&a.entity)
                && self.client_quotas.0.len() >= ENTITIES_MAX
            {
                results.push(ItemResult::err(
                    &name,
                    code::INVALID_REQUEST,
                    format!("es keeps at most {ENTITIES_MAX} client quota entities"),
                ));
                continue;
            }
            changed |= self.client_quotas.apply(a);
            results.push(ItemResult::ok(&name));
        }
        if changed {
            ev.push(MetaEvent::ClientQuotas);
        }
        MetaResponse::Items { results }
    }

    pub(super) fn put_api_keys(
        &mut self,
        keys: &[ApiKey],
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        let mut results = Vec::with_capacity(keys.len());
        let mut changed = false;
        for k in keys {
            let refused = |m: &str| ItemResult::err(&k.id, code::INVALID_REQUEST, m);
            if let Err(why) = k.validate() {
                results.push(refused(&why));
                continue;
            }
            match self.api_keys.get(&k.id) {
                Some(old) if old == k => {}
                Some(old) if old.revoked => {
                    results.push(refused("the key was revoked"));
                    continue;
                }
                Some(_) if !k.revoked => {
                    results.push(refused("a different key with this id exists"));
                    continue;
                }
                _ => {
                    self.api_keys.insert(k.id.clone(), k.clone());
                    changed = true;
                }
            }
            results.push(ItemResult::ok(&k.id));
        }
        if changed {
            ev.push(MetaEvent::ApiKeys);
        }
        MetaResponse::Items { results }
    }
}

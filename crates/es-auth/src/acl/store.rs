//! [`Acls`]: the set of stored bindings, with CreateAcls / DeleteAcls / DescribeAcls
//! semantics of Kafka's controller (`AclControlManager`) and `AclCache`.
//!
//! Invariants: every stored binding passed [`validate_create`]; no binding is stored
//! twice (creating one that exists is a successful no-op, as in Kafka); iteration is
//! in Kafka's `StandardAcl` order. Deserialising checks the first two, so a snapshot
//! or `data/acls.json` edited by hand cannot smuggle in a binding Kafka would refuse.

use std::collections::{BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use super::types::{AclBinding, AclBindingFilter};
use super::validate::{
    validate_create, validate_create_in_handler, validate_delete_filter, validate_new_acl,
    AclError, ACL_CHANGES_PER_REQUEST_MAX,
};

/// The stored ACL bindings. Serialised as a JSON array of [`AclBinding`]s in Kafka's
/// order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<AclBinding>", into = "Vec<AclBinding>")]
pub struct Acls {
    bindings: BTreeSet<AclBinding>,
}

/// What a CreateAcls would do ([`Acls::plan_create`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatePlan {
    /// One per requested binding, in request order: `Ok(true)` added, `Ok(false)`
    /// already present (or asked for earlier in the same request); both are Kafka's
    /// success (error code 0, null message).
    pub results: Vec<Result<bool, AclError>>,
    /// The bindings to add, each once, in request order.
    pub added: Vec<AclBinding>,
}

/// What a DeleteAcls would do ([`Acls::plan_delete`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletePlan {
    /// One per filter, in request order: the stored bindings it matches (a binding
    /// matched by several filters is listed under each, as Kafka does), or the
    /// filter's error.
    pub results: Vec<Result<Vec<AclBinding>, AclError>>,
    /// The distinct bindings to remove.
    pub removed: Vec<AclBinding>,
}

impl Acls {
    /// No bindings.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many bindings are stored.
    pub fn len(&self) -> usize {
        self.bindings.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }

    /// The bindings in Kafka's `StandardAcl` order.
    pub fn iter(&self) -> impl Iterator<Item = &AclBinding> + '_ {
        self.bindings.iter()
    }

    /// Whether `binding` is stored.
    pub fn contains(&self, binding: &AclBinding) -> bool {
        self.bindings.contains(binding)
    }

    /// Stores `binding` if Kafka would ([`validate_create`]): `Ok(true)` if it is new,
    /// `Ok(false)` if it was already there (Kafka's success no-op). This is also how
    /// a replayed metadata record is applied.
    pub fn create(&mut self, binding: AclBinding) -> Result<bool, AclError> {
        validate_create(&binding)?;
        Ok(self.bindings.insert(binding))
    }

    /// Removes `binding`; whether it was there. For replaying a removal.
    pub fn remove(&mut self, binding: &AclBinding) -> bool {
        self.bindings.remove(binding)
    }

    /// Removes and returns every binding `filter` matches. No validation: a filter
    /// with an UNKNOWN part matches nothing (see [`Acls::delete_batch`] for the
    /// DeleteAcls semantics).
    pub fn delete(&mut self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        let removed = self.describe(filter);
        for b in &removed {
            self.bindings.remove(b);
        }
        removed
    }

    /// The bindings `filter` matches, in Kafka's order (DescribeAcls; Kafka then
    /// groups them by resource pattern in no particular order).
    pub fn describe(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.bindings
            .iter()
            .filter(|b| filter.matches(b))
            .cloned()
            .collect()
    }

    /// What Kafka answers to a CreateAcls of `bindings`, without changing anything.
    ///
    /// Each binding gets the first error of [`validate_create`], or success. When more
    /// than [`ACL_CHANGES_PER_REQUEST_MAX`] bindings would be added, Kafka's
    /// controller fails the whole batch: every binding that passed the handler's
    /// checks (CLUSTER name, empty name) gets POLICY_VIOLATION "Unable to perform
    /// excessively large batch operation.", including those the controller would have
    /// refused, and nothing is added.
    pub fn plan_create(&self, bindings: &[AclBinding]) -> CreatePlan {
        let mut results = Vec::with_capacity(bindings.len());
        let mut added: Vec<AclBinding> = Vec::new();
        let mut seen: HashSet<&AclBinding> = HashSet::new();
        for b in bindings {
            let result = validate_create(b).map(|()| !self.bindings.contains(b) && seen.insert(b));
            if result == Ok(true) {
                added.push(b.clone());
            }
            results.push(result);
        }
        if added.len() > ACL_CHANGES_PER_REQUEST_MAX {
            let results = bindings
                .iter()
                .map(|b| match validate_create_in_handler(b) {
                    Err(e) => Err(e),
                    Ok(()) => Err(AclError::excessively_large_batch()),
                })
                .collect();
            return CreatePlan {
                results,
                added: Vec::new(),
            };
        }
        CreatePlan { results, added }
    }

    /// [`Acls::plan_create`] and then the additions.
    pub fn create_batch(&mut self, bindings: &[AclBinding]) -> Vec<Result<bool, AclError>> {
        let plan = self.plan_create(bindings);
        for b in plan.added {
            // Validated by plan_create; validate again so this set never holds a
            // binding Kafka would refuse, whatever plan_create becomes.
            if validate_new_acl(&b).is_ok() {
                self.bindings.insert(b);
            }
        }
        plan.results
    }

    /// What Kafka answers to a DeleteAcls of `filters`, without changing anything.
    ///
    /// Each filter is checked with [`validate_delete_filter`] and otherwise lists the
    /// stored bindings it matches (matching is against the state before the request:
    /// a binding matched by two filters is reported by both and removed once). When
    /// more than [`ACL_CHANGES_PER_REQUEST_MAX`] distinct bindings would be removed,
    /// Kafka's controller fails the whole request: every filter gets
    /// UNKNOWN_SERVER_ERROR with a null message, and nothing is removed.
    pub fn plan_delete(&self, filters: &[AclBindingFilter]) -> DeletePlan {
        let mut results = Vec::with_capacity(filters.len());
        let mut removed: Vec<AclBinding> = Vec::new();
        let mut seen: HashSet<&AclBinding> = HashSet::new();
        for f in filters {
            let result = validate_delete_filter(f).map(|()| {
                let matched: Vec<&AclBinding> =
                    self.bindings.iter().filter(|b| f.matches(b)).collect();
                for b in &matched {
                    if seen.insert(b) {
                        removed.push((*b).clone());
                    }
                }
                matched.into_iter().cloned().collect()
            });
            results.push(result);
            if removed.len() > ACL_CHANGES_PER_REQUEST_MAX {
                return DeletePlan {
                    results: filters
                        .iter()
                        .map(|_| Err(AclError::unknown_server_error()))
                        .collect(),
                    removed: Vec::new(),
                };
            }
        }
        DeletePlan { results, removed }
    }

    /// [`Acls::plan_delete`] and then the removals.
    pub fn delete_batch(
        &mut self,
        filters: &[AclBindingFilter],
    ) -> Vec<Result<Vec<AclBinding>, AclError>> {
        let plan = self.plan_delete(filters);
        for b in &plan.removed {
            self.bindings.remove(b);
        }
        plan.results
    }
}

impl<'a> IntoIterator for &'a Acls {
    type Item = &'a AclBinding;
    type IntoIter = std::collections::btree_set::Iter<'a, AclBinding>;

    fn into_iter(self) -> Self::IntoIter {
        self.bindings.iter()
    }
}

/// Loading refuses a binding Kafka would refuse; duplicates collapse.
impl TryFrom<Vec<AclBinding>> for Acls {
    type Error = String;

    fn try_from(bindings: Vec<AclBinding>) -> Result<Self, Self::Error> {
        let mut acls = Acls::new();
        for b in bindings {
            if let Err(e) = validate_create(&b) {
                return Err(format!("invalid ACL binding {b}: {e}"));
            }
            acls.bindings.insert(b);
        }
        Ok(acls)
    }
}

impl From<Acls> for Vec<AclBinding> {
    fn from(acls: Acls) -> Self {
        acls.bindings.into_iter().collect()
    }
}

//! `/api/v1/mirrors`: mirror links and their topics (docs/migration.md).

use super::*;

pub(super) async fn mirrors(State(sh): State<Arc<Shared>>) -> ApiResult {
    let b = broker_of(&sh)?;
    let statuses = b
        .extension(MirrorSlot::default)
        .get()
        .map(|c| c.status())
        .unwrap_or_default();
    let image = b.image();
    let mut out = Vec::new();
    if let Some(i) = image.as_deref() {
        for (name, link) in &i.mirror_links {
            let topics: Vec<Value> = statuses
                .iter()
                .filter(|t| &t.link == name)
                .map(|t| {
                    json!({
                        "topic": t.topic,
                        "source_topic": t.source_topic,
                        "state": t.state,
                        "error": t.error,
                        "lag": t.partitions.iter().map(|p| p.lag.max(0)).sum::<i64>(),
                        "partitions": t.partitions.len(),
                    })
                })
                .collect();
            out.push(json!({
                "link": name,
                "bootstrap": link.source_bootstrap,
                "topics": topics,
                "groups": link.groups,
            }));
        }
    }
    ok(Value::Array(out))
}

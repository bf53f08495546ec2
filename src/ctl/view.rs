//! How electctl prints the daemon's answers: the status table, an all-groups answer
//! seen group by group, and the one group a command needs.

use crate::json::Value;

fn show(v: &Value, key: &str) -> String {
    match v.get(key) {
        None | Some(Value::Null) => "-".into(),
        Some(Value::Str(s)) => s.clone(),
        Some(Value::Int(n)) => format!("{n}"),
        Some(Value::Num(n)) => format!("{n}"),
        Some(other) => format!("{other:?}"),
    }
}

pub(super) fn table(v: &Value) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "server    {} ({})\n",
        show(v, "id"),
        show(v, "name")
    ));
    if let Some(g) = v.get("group").and_then(Value::as_str) {
        out.push_str(&format!("group     {g}\n"));
    }
    out.push_str(&format!("role      {}\n", show(v, "role")));
    out.push_str(&format!(
        "leader    {}\n",
        v.get("leader")
            .and_then(Value::as_u64)
            .map_or("none".into(), |l| l.to_string())
    ));
    out.push_str(&format!("term      {}\n", show(v, "term")));
    if let Some(ms) = v.get("lease_ms").and_then(Value::as_u64) {
        out.push_str(&format!("lease     {ms} ms left\n"));
    }
    out.push_str(&format!("elector   {}\n", show(v, "elector")));
    out.push_str(&format!("voted in  term {}\n", show(v, "voted_term")));
    let health = show(v, "health");
    match v.get("health_cause").and_then(Value::as_str) {
        Some(c) => out.push_str(&format!("health    {health} ({c})\n")),
        None => out.push_str(&format!("health    {health}\n")),
    }
    let drained = v.get("drained") == Some(&Value::Bool(true));
    out.push_str(&format!(
        "drained   {}\n",
        if drained {
            "yes: will not lead until 'electctl undrain'"
        } else {
            "no"
        }
    ));
    if let Some(why) = v.get("config_refused").and_then(Value::as_str) {
        out.push_str(&format!(
            "config    last reload REFUSED: {why}\n          running the previous configuration; a restart would load the refused file\n"
        ));
    }
    out.push_str("peers     ");
    let peers: Vec<String> = v
        .get("peers")
        .and_then(Value::as_array)
        .unwrap_or(&[])
        .iter()
        .map(|p| {
            let ago = p
                .get("heard_ms_ago")
                .and_then(Value::as_u64)
                .map_or("never heard".into(), |a| format!("{a} ms ago"));
            let fit = match p.get("healthy") {
                Some(Value::Bool(true)) => ", fit",
                Some(Value::Bool(false)) => ", unfit",
                _ => "",
            };
            format!("{}: {ago}{fit}", show(p, "id"))
        })
        .collect();
    out.push_str(&peers.join(", "));
    out.push('\n');
    out
}

/// Every group's status of an all-groups line, each completed with what the line
/// holds once for all (server, refused reload, when each peer was heard), so each
/// reads as a one-group status.
pub(super) fn group_views(v: &Value) -> Vec<Value> {
    let Some(groups) = v.get("groups").and_then(Value::as_array) else {
        return vec![v.clone()];
    };
    let heard = v.get("peers").and_then(Value::as_array).unwrap_or(&[]);
    groups
        .iter()
        .map(|g| {
            let Value::Obj(mut fields) = g.clone() else {
                return g.clone();
            };
            for key in ["id", "name", "config_refused"] {
                if let Some(x) = v.get(key) {
                    fields.insert(key.to_string(), x.clone());
                }
            }
            let listed = |key: &str, id: Option<u64>| {
                id.is_some()
                    && g.get(key)
                        .and_then(Value::as_array)
                        .unwrap_or(&[])
                        .iter()
                        .any(|x| x.as_u64() == id)
            };
            let peers = heard
                .iter()
                .map(|p| {
                    let mut p = p.clone();
                    let id = p.get("id").and_then(Value::as_u64);
                    let healthy = if listed("peers_fit", id) {
                        Some(Value::Bool(true))
                    } else if listed("peers_unfit", id) {
                        Some(Value::Bool(false))
                    } else {
                        None
                    };
                    if let (Value::Obj(pf), Some(h)) = (&mut p, healthy) {
                        pf.insert("healthy".into(), h);
                    }
                    p
                })
                .collect();
            fields.insert("peers".into(), Value::Arr(peers));
            Value::Obj(fields)
        })
        .collect()
}

/// The per-group parts of an answer (`groups`), or the answer itself.
pub(super) fn answers(v: &Value) -> Vec<Value> {
    match v.get("groups").and_then(Value::as_array) {
        Some(gs) => gs.to_vec(),
        None => vec![v.clone()],
    }
}

/// One group's status line: the answer itself, or, when the daemon answers with every
/// group (`groups`), the only one there is; several are an error naming them.
pub(super) fn one_group(v: Value, cmd: &str) -> Result<Value, String> {
    let Some(groups) = v.get("groups").and_then(Value::as_array) else {
        return Ok(v);
    };
    if groups.len() == 1 {
        return Ok(groups[0].clone());
    }
    let names: Vec<String> = groups.iter().map(|g| show(g, "group")).collect();
    Err(format!(
        "this server runs several election groups; name one: electctl {cmd} GROUP ({})",
        names.join(", ")
    ))
}

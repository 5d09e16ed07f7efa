//! `sacctmgr`: clusters, accounts, users, QoS and associations in `drover accounting`, with
//! Slurm 22.05's verbs, keys, messages and tables. Changes are computed here from the whole
//! administrative state (small: rows per account and user) and sent as the rows to put and
//! delete, in one transaction; reads go over TCP, changes over the service's local socket,
//! where the caller's identity is its peer credentials.

use crate::common;
use drover_proto::v1::{self, accounting_client::AccountingClient};
use std::collections::BTreeSet;

const ENTITIES: &str = "No valid entity in list command\n\
Input line must include \"Account\", \"Association\", \"Cluster\", \"Configuration\",\n\
\"Event\", \"Federation\", \"Problem\", \"QOS\", \"Resource\", \"Reservation\",\n\
\"RunAwayJobs\", \"Stats\", \"Transaction\", \"TRES\", \"User\", or \"WCKey\"";

#[derive(Debug, Default, Clone)]
struct Opts {
    immediate: bool,
    noheader: bool,
    /// Some(true): `-p` (a `|` after every field); Some(false): `-P`.
    parsable: Option<bool>,
    quiet: bool,
    /// `-s/--associations`: lists with each entity's associations, as `withassoc` does
    /// (Snakemake's Slurm executor asks `sacctmgr -n -s list user U format=account`).
    with_assoc: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entity {
    Cluster,
    Account,
    User,
    Qos,
    Assoc,
}

fn entity(word: &str) -> Option<Entity> {
    let w = word.to_ascii_lowercase();
    Some(match w.as_str() {
        "cluster" | "clusters" => Entity::Cluster,
        "account" | "accounts" | "acct" | "accts" => Entity::Account,
        "user" | "users" => Entity::User,
        "qos" | "qoss" => Entity::Qos,
        "association" | "associations" | "assoc" | "assocs" => Entity::Assoc,
        _ => return None,
    })
}

/// A command line after the verb and entity: bare names, `where` conditions, `set` values,
/// `format=`, and flags (`withassoc`, `tree`).
#[derive(Debug, Default)]
struct Words {
    names: Vec<String>,
    conds: Vec<(String, String)>,
    sets: Vec<(String, String)>,
    /// The `set` words as given (for messages that quote them).
    set_words: Vec<String>,
    format: Option<String>,
    flags: BTreeSet<String>,
}

/// Splits `key=value` words (a key may be given as `key = value`, and `+=`/`-=` are kept in
/// the key) into where conditions and set values; before `where`/`set`, `key=value` words
/// are conditions for show/modify/delete and values for add.
fn parse_words(words: &[String], add: bool) -> Words {
    let mut w = Words::default();
    let mut mode = if add { 's' } else { 'c' };
    for word in words {
        let lower = word.to_ascii_lowercase();
        match lower.as_str() {
            "where" => {
                mode = 'c';
                continue;
            }
            "set" => {
                mode = 's';
                continue;
            }
            "withassoc" | "withassocs" | "tree" | "withdeleted" | "withcoordinators" | "withcoord"
            | "withsubaccounts" | "wopl" | "wolimits" | "wopinfo" => {
                w.flags.insert(lower);
                continue;
            }
            _ => {}
        }
        match word.split_once('=') {
            Some((k, v)) => {
                let k = k.trim().to_ascii_lowercase();
                if k == "format" {
                    w.format = Some(v.to_string());
                } else if mode == 's' {
                    w.sets.push((k, v.to_string()));
                    w.set_words.push(word.clone());
                } else {
                    w.conds.push((k, v.to_string()));
                }
            }
            None => w.names.extend(word.split(',').filter(|n| !n.is_empty()).map(String::from)),
        }
    }
    w
}

fn list(v: &str) -> Vec<String> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

/// Values of conditions whose key is one of `keys` (comma lists joined).
fn cond(w: &Words, keys: &[&str]) -> Vec<String> {
    w.conds.iter().filter(|(k, _)| keys.contains(&k.as_str())).flat_map(|(_, v)| list(v)).collect()
}

// ---- values as sacctmgr prints them ----

fn mins(m: Option<u64>) -> String {
    m.map(|m| drover_model::duration::fmt_long(m * 60)).unwrap_or_default()
}

fn num(n: Option<u32>) -> String {
    n.map(|n| n.to_string()).unwrap_or_default()
}

/// A column: its header, width, and whether it is left-justified.
#[derive(Debug, Clone, PartialEq)]
struct Col {
    key: &'static str,
    header: &'static str,
    width: usize,
    left: bool,
}

/// Every field sacctmgr's `format=` knows here: (key, aliases, header, width).
const FIELDS: &[(&str, &[&str], &str, usize)] = &[
    ("account", &["account", "acct"], "Account", 10),
    ("adminlevel", &["admin", "adminlevel"], "Admin", 9),
    ("cluster", &["cluster"], "Cluster", 10),
    ("controlhost", &["controlhost"], "ControlHost", 15),
    ("controlport", &["controlport"], "ControlPort", 12),
    ("defaultaccount", &["defaultaccount", "defacct"], "Def Acct", 10),
    ("defaultqos", &["defaultqos", "defqos"], "Def QOS", 9),
    ("description", &["description", "descr"], "Descr", 20),
    ("flags", &["flags"], "Flags", 40),
    ("gracetime", &["gracetime"], "GraceTime", 10),
    ("grpcpumins", &["grpcpumins"], "GrpCPUMins", 11),
    ("grpcpus", &["grpcpus"], "GrpCPUs", 8),
    ("grpjobs", &["grpjobs"], "GrpJobs", 7),
    ("grpmem", &["grpmem"], "GrpMem", 7),
    ("grpnodes", &["grpnodes"], "GrpNodes", 8),
    ("grpsubmit", &["grpsubmit", "grpsubmitjobs"], "GrpSubmit", 9),
    ("grptres", &["grptres"], "GrpTRES", 13),
    ("grptresmins", &["grptresmins"], "GrpTRESMins", 13),
    ("grptresrunmins", &["grptresrunmins"], "GrpTRESRunMins", 13),
    ("grpwall", &["grpwall"], "GrpWall", 11),
    ("maxcpumins", &["maxcpumins"], "MaxCPUMins", 11),
    ("maxcpus", &["maxcpus"], "MaxCPUs", 8),
    ("maxjobs", &["maxjobs"], "MaxJobs", 7),
    ("maxjobspa", &["maxjobspa", "maxjobsperaccount"], "MaxJobsPA", 9),
    ("maxjobspu", &["maxjobspu", "maxjobsperuser"], "MaxJobsPU", 9),
    ("maxnodes", &["maxnodes"], "MaxNodes", 8),
    ("maxsubmit", &["maxsubmit", "maxsubmitjobs"], "MaxSubmit", 9),
    ("maxsubmitpa", &["maxsubmitpa", "maxsubmitjobsperaccount"], "MaxSubmitPA", 11),
    ("maxsubmitpu", &["maxsubmitpu", "maxsubmitjobsperuser"], "MaxSubmitPU", 11),
    ("maxtres", &["maxtres", "maxtresperjob"], "MaxTRES", 13),
    ("maxtresmins", &["maxtresmins", "maxtresminsperjob"], "MaxTRESMins", 13),
    ("maxtrespa", &["maxtrespa", "maxtresperaccount"], "MaxTRESPA", 13),
    ("maxtrespernode", &["maxtrespernode"], "MaxTRESPerNode", 14),
    ("maxtrespu", &["maxtrespu", "maxtresperuser"], "MaxTRESPU", 13),
    ("maxwall", &["maxwall", "maxwalldurationperjob"], "MaxWall", 11),
    ("mintres", &["mintres", "mintresperjob"], "MinTRES", 13),
    ("name", &["name"], "Name", 10),
    ("organization", &["organization", "org"], "Org", 20),
    ("parentname", &["parentname", "parent"], "ParentName", 10),
    ("partition", &["partition"], "Partition", 10),
    ("preempt", &["preempt"], "Preempt", 10),
    ("preemptexempttime", &["preemptexempttime"], "PreemptExemptTime", 19),
    ("preemptmode", &["preemptmode"], "PreemptMode", 11),
    ("priority", &["priority"], "Priority", 10),
    ("qos", &["qos"], "QOS", 20),
    ("rpc", &["rpc"], "RPC", 5),
    ("share", &["share", "shares", "fairshare"], "Share", 9),
    ("usagefactor", &["usagefactor"], "UsageFactor", 11),
    ("usagethres", &["usagethres", "usagethreshold"], "UsageThres", 10),
    ("user", &["user"], "User", 10),
];

fn col(key: &str) -> Col {
    let (k, _, header, width) =
        FIELDS.iter().find(|(k, ..)| *k == key).copied().expect("invariant: a default column is a known field");
    Col { key: k, header, width, left: false }
}

fn cols(keys: &str) -> Vec<Col> {
    keys.split(',').map(col).collect()
}

/// `format=` items: a field (any alias, any case) with an optional `%N` (right-justified) or
/// `%-N` (left-justified) width.
fn format_cols(spec: &str) -> Result<Vec<Col>, String> {
    spec.split(',')
        .filter(|f| !f.is_empty())
        .map(|f| {
            let (name, width) = f.split_once('%').unwrap_or((f, ""));
            let lower = name.to_ascii_lowercase();
            let (k, _, header, w) = FIELDS
                .iter()
                .find(|(_, aliases, ..)| aliases.contains(&lower.as_str()))
                .copied()
                .ok_or_else(|| format!("Invalid field requested: \"{name}\""))?;
            let (width, left) = match width.parse::<i32>() {
                Ok(n) => (n.unsigned_abs() as usize, n < 0),
                Err(_) => (w, false),
            };
            Ok(Col { key: k, header, width, left })
        })
        .collect()
}

fn cell(c: &Col, v: &str, header: bool) -> String {
    // Headers are cut plainly, values with Slurm's `+`.
    crate::format::slurm_cell(v, c.width, c.left, !header)
}

/// Prints a table: a header (unless `-n`), a dash line (unless parsable), and the rows.
fn print_table(o: &Opts, cols: &[Col], rows: &[Vec<String>]) {
    let mut out = String::new();
    let line = |out: &mut String, vals: &[String], header: bool| {
        match o.parsable {
            Some(trailing) => {
                out.push_str(&vals.join("|"));
                if trailing {
                    out.push('|');
                }
            }
            None => {
                for (c, v) in cols.iter().zip(vals) {
                    out.push_str(&cell(c, v, header));
                    out.push(' ');
                }
            }
        }
        out.push('\n');
    };
    if !o.noheader {
        // Parsable headers are the full names (`GrpTRESRunMins`).
        let names: Vec<String> =
            cols.iter().map(|c| FIELDS.iter().find(|f| f.0 == c.key).map_or(c.header, |f| f.2).to_string()).collect();
        line(&mut out, &names, true);
        if o.parsable.is_none() {
            out.push_str(&cols.iter().map(|c| "-".repeat(c.width) + " ").collect::<String>());
            out.push('\n');
        }
    }
    for r in rows {
        line(&mut out, r, false);
    }
    print!("{out}");
}

/// What one association shows for a field (empty where it has no value).
fn assoc_field(a: &v1::AcctAssoc, key: &str) -> String {
    let l = a.limits.clone().unwrap_or_default();
    match key {
        "cluster" => a.cluster.clone(),
        "account" => a.account.clone(),
        "user" => a.user.clone(),
        "partition" => a.partition.clone(),
        "parentname" => {
            if a.user.is_empty() {
                a.parent.clone()
            } else {
                String::new()
            }
        }
        "share" => l.shares.unwrap_or(1).to_string(),
        "priority" => num(l.priority),
        "grpjobs" => num(l.grp_jobs),
        "grpsubmit" => num(l.grp_submit),
        "grptres" => l.grp_tres,
        "grptresmins" => l.grp_tres_mins,
        "grptresrunmins" => l.grp_tres_run_mins,
        "grpwall" => mins(l.grp_wall_mins),
        "maxjobs" => num(l.max_jobs),
        "maxsubmit" => num(l.max_submit),
        "maxtres" => l.max_tres,
        "maxtrespernode" => l.max_tres_per_node,
        "maxtresmins" => l.max_tres_mins,
        "maxwall" => mins(l.max_wall_mins),
        "grpcpus" => tres_part(&l.grp_tres, "cpu"),
        "grpmem" => tres_part(&l.grp_tres, "mem"),
        "grpnodes" => tres_part(&l.grp_tres, "node"),
        "grpcpumins" => tres_part(&l.grp_tres_mins, "cpu"),
        "maxcpus" => tres_part(&l.max_tres, "cpu"),
        "maxnodes" => tres_part(&l.max_tres, "node"),
        "maxcpumins" => tres_part(&l.max_tres_mins, "cpu"),
        "qos" => a.qos.join(","),
        "defaultqos" => a.default_qos.clone(),
        _ => String::new(),
    }
}

fn tres_part(t: &str, name: &str) -> String {
    t.split(',').find_map(|p| p.strip_prefix(name)?.strip_prefix('=')).unwrap_or("").to_string()
}

fn qos_field(q: &v1::AcctQos, key: &str) -> String {
    let l = q.limits.clone().unwrap_or_default();
    match key {
        "name" => q.name.clone(),
        "description" => q.description.clone(),
        "priority" => q.priority.to_string(),
        "gracetime" => drover_model::duration::fmt_long(q.grace_time_secs),
        "preempt" => q.preempt.join(","),
        "preemptexempttime" => q.preempt_exempt_secs.map(drover_model::duration::fmt_long).unwrap_or_default(),
        "preemptmode" => q.preempt_mode.clone(),
        "flags" => q.flags.join(","),
        "usagethres" => q.usage_threshold.map(|t| format!("{t:.6}")).unwrap_or_default(),
        "usagefactor" => format!("{:.6}", q.usage_factor),
        "maxjobspu" => num(q.max_jobs_per_user),
        "maxsubmitpu" => num(q.max_submit_per_user),
        "maxtrespu" => q.max_tres_per_user.clone(),
        "maxjobspa" => num(q.max_jobs_per_account),
        "maxsubmitpa" => num(q.max_submit_per_account),
        "maxtrespa" => q.max_tres_per_account.clone(),
        "mintres" => q.min_tres.clone(),
        "share" => String::new(),
        other => {
            let a = v1::AcctAssoc { limits: Some(l), ..Default::default() };
            if other == "priority" {
                String::new()
            } else {
                assoc_field(&a, other)
            }
        }
    }
}

fn show(o: &Opts, e: Entity, w: &Words, st: &v1::AdminState) -> Result<(), String> {
    let names: Vec<String> = w.names.iter().cloned().chain(cond(w, &["name", "names"])).collect();
    let named = |n: &str, extra: &[String]| {
        (names.is_empty() && extra.is_empty()) || names.iter().any(|x| x == n) || extra.iter().any(|x| x == n)
    };
    let clusters = cond(w, &["cluster", "clusters"]);
    let in_cluster = |c: &str| clusters.is_empty() || clusters.iter().any(|x| x == c);
    let withassoc = w.flags.contains("withassoc") || w.flags.contains("withassocs");
    let custom = w.format.as_deref().map(format_cols).transpose()?;
    let mut rows: Vec<Vec<String>> = Vec::new();
    let cols = match e {
        Entity::Cluster => {
            let cols = custom.unwrap_or_else(|| {
                cols("cluster,controlhost,controlport,rpc,share,grpjobs,grptres,grpsubmit,maxjobs,maxtres,maxsubmit,maxwall,qos,defaultqos")
            });
            for c in st.clusters.iter().filter(|c| named(&c.name, &clusters)) {
                let root = st.assocs.iter().find(|a| a.cluster == c.name && a.account == "root" && a.user.is_empty());
                rows.push(
                    cols.iter()
                        .map(|col| match col.key {
                            "cluster" => c.name.clone(),
                            "controlhost" => c.control_host.clone(),
                            "controlport" => c.control_port.to_string(),
                            "rpc" => c.rpc.to_string(),
                            k => root.map(|a| assoc_field(a, k)).unwrap_or_default(),
                        })
                        .collect(),
                );
            }
            cols
        }
        Entity::Account => {
            let base = "account,description,organization";
            let cols = custom.unwrap_or_else(|| {
                if withassoc {
                    cols(&format!("{base},cluster,parentname,user,share,priority,grpjobs,grpnodes,grpcpus,grpmem,grpsubmit,grpwall,grpcpumins,maxjobs,maxnodes,maxcpus,maxsubmit,maxwall,maxcpumins,qos,defaultqos"))
                } else {
                    cols(base)
                }
            });
            let accounts = cond(w, &["account", "accounts"]);
            for a in st.accounts.iter().filter(|a| named(&a.name, &accounts)) {
                let field = |k: &str, assoc: Option<&v1::AcctAssoc>| match k {
                    "account" => a.name.clone(),
                    "description" => a.description.clone(),
                    "organization" => a.organization.clone(),
                    k => assoc.map(|x| assoc_field(x, k)).unwrap_or_default(),
                };
                if withassoc {
                    // The account's own association, then its users' (newest first, as
                    // Slurm's nested-set order puts them).
                    let mut assocs: Vec<&v1::AcctAssoc> =
                        st.assocs.iter().filter(|x| x.account == a.name && in_cluster(&x.cluster)).collect();
                    assocs.sort_by_key(|x| (x.cluster.clone(), !x.user.is_empty(), std::cmp::Reverse(x.id)));
                    for x in assocs {
                        rows.push(cols.iter().map(|c| field(c.key, Some(x))).collect());
                    }
                } else {
                    rows.push(cols.iter().map(|c| field(c.key, None)).collect());
                }
            }
            cols
        }
        Entity::User => {
            let base = "user,defaultaccount,adminlevel";
            let cols = custom.unwrap_or_else(|| {
                if withassoc {
                    cols(&format!("{base},cluster,account,partition,share,priority,maxjobs,maxnodes,maxcpus,maxsubmit,maxwall,maxcpumins,qos,defaultqos"))
                } else {
                    cols(base)
                }
            });
            let users = cond(w, &["user", "users"]);
            let accounts = cond(w, &["account", "accounts"]);
            for u in st.users.iter().filter(|u| named(&u.name, &users)) {
                let field = |k: &str, assoc: Option<&v1::AcctAssoc>| match k {
                    "user" => u.name.clone(),
                    "defaultaccount" => u.default_account.clone(),
                    "adminlevel" => u.admin_level.clone(),
                    k => assoc.map(|x| assoc_field(x, k)).unwrap_or_default(),
                };
                if withassoc {
                    let mut assocs: Vec<&v1::AcctAssoc> = st
                        .assocs
                        .iter()
                        .filter(|x| x.user == u.name && in_cluster(&x.cluster))
                        .filter(|x| accounts.is_empty() || accounts.contains(&x.account))
                        .collect();
                    assocs.sort_by(|a, b| {
                        (&a.cluster, &a.account, &a.partition).cmp(&(&b.cluster, &b.account, &b.partition))
                    });
                    for x in assocs {
                        rows.push(cols.iter().map(|c| field(c.key, Some(x))).collect());
                    }
                } else {
                    rows.push(cols.iter().map(|c| field(c.key, None)).collect());
                }
            }
            cols
        }
        Entity::Qos => {
            let cols = custom.unwrap_or_else(|| {
                cols("name,priority,gracetime,preempt,preemptexempttime,preemptmode,flags,usagethres,usagefactor,grptres,grptresmins,grptresrunmins,grpjobs,grpsubmit,grpwall,maxtres,maxtrespernode,maxtresmins,maxwall,maxtrespu,maxjobspu,maxsubmitpu,maxtrespa,maxjobspa,maxsubmitpa,mintres")
            });
            for q in st.qos.iter().filter(|q| named(&q.name, &[])) {
                rows.push(cols.iter().map(|c| qos_field(q, c.key)).collect());
            }
            cols
        }
        Entity::Assoc => {
            let tree = w.flags.contains("tree");
            let mut cols = custom.unwrap_or_else(|| {
                cols("cluster,account,user,partition,share,priority,grpjobs,grptres,grpsubmit,grpwall,grptresmins,maxjobs,maxtres,maxtrespernode,maxsubmit,maxwall,maxtresmins,qos,defaultqos,grptresrunmins")
            });
            if tree {
                for c in cols.iter_mut().filter(|c| c.key == "account") {
                    c.width = 20;
                    c.left = true;
                }
            }
            let accounts = cond(w, &["account", "accounts"]);
            let users = cond(w, &["user", "users"]);
            let parts = cond(w, &["partition", "partitions"]);
            for (depth, a) in drover_proto::acct::assoc_order(st) {
                if !in_cluster(&a.cluster)
                    || (!accounts.is_empty() && !accounts.contains(&a.account))
                    || (!users.is_empty() && !users.contains(&a.user))
                    || (!parts.is_empty() && !parts.contains(&a.partition))
                {
                    continue;
                }
                rows.push(
                    cols.iter()
                        .map(|c| {
                            let v = assoc_field(a, c.key);
                            if tree && c.key == "account" {
                                format!("{}{v}", " ".repeat(depth))
                            } else {
                                v
                            }
                        })
                        .collect(),
                );
            }
            cols
        }
    };
    print_table(o, &cols, &rows);
    Ok(())
}

// ---- changes ----

/// The outcome of a change: rows to put and delete, what to print, and the exit status.
#[derive(Default)]
struct Change {
    put: v1::AdminState,
    delete: v1::AdminState,
    out: String,
    err: String,
    rc: i32,
}

/// Sets one limit (or QoS list) of an association from `key=value`; `-1` clears it.
/// `Ok(false)`: not a limit key.
fn set_limit(a: &mut v1::AcctAssoc, key: &str, v: &str) -> Result<bool, String> {
    let l = a.limits.get_or_insert_with(Default::default);
    let clear = v == "-1";
    let count = |v: &str| -> Result<Option<u32>, String> {
        if clear {
            return Ok(None);
        }
        v.parse().map(Some).map_err(|_| format!(" Bad value for {key}: {v}"))
    };
    let wall = |v: &str| -> Result<Option<u64>, String> {
        if clear {
            return Ok(None);
        }
        match drover_model::duration::parse_time_limit(v) {
            Ok(Some(s)) => Ok(Some(s / 60)),
            _ => Err(format!(" Bad MaxWall time format: {v}")),
        }
    };
    let tres = |v: &str| if clear { String::new() } else { v.to_ascii_lowercase() };
    match key {
        "fairshare" | "share" | "shares" => l.shares = count(v)?.or(Some(1)),
        "priority" => l.priority = count(v)?,
        "grpjobs" => l.grp_jobs = count(v)?,
        "grpsubmitjobs" | "grpsubmit" => l.grp_submit = count(v)?,
        "grptres" => l.grp_tres = tres(v),
        "grptresmins" => l.grp_tres_mins = tres(v),
        "grptresrunmins" => l.grp_tres_run_mins = tres(v),
        "grpwall" => l.grp_wall_mins = wall(v)?,
        "maxjobs" => l.max_jobs = count(v)?,
        "maxsubmitjobs" | "maxsubmit" => l.max_submit = count(v)?,
        "maxtres" | "maxtresperjob" => l.max_tres = tres(v),
        "maxtrespernode" => l.max_tres_per_node = tres(v),
        "maxtresmins" | "maxtresminsperjob" => l.max_tres_mins = tres(v),
        "maxwall" | "maxwalldurationperjob" => l.max_wall_mins = wall(v)?,
        "grpcpus" => l.grp_tres = if clear { String::new() } else { format!("cpu={v}") },
        "maxcpus" => l.max_tres = if clear { String::new() } else { format!("cpu={v}") },
        "qos" => a.qos = if clear { Vec::new() } else { list(v) },
        "defaultqos" => a.default_qos = if clear { String::new() } else { v.to_string() },
        _ => return Ok(false),
    }
    Ok(true)
}

/// Limit lines as sacctmgr lists the values a command set (`  MaxJobs       = 3`).
fn limit_lines(sets: &[(String, String)]) -> String {
    sets.iter()
        .filter(|(k, _)| set_limit(&mut Default::default(), k, "1").unwrap_or(false))
        .map(|(k, v)| {
            let name =
                FIELDS.iter().find(|f| f.1.contains(&k.as_str())).map(|f| f.2.to_string()).unwrap_or_else(|| k.clone());
            format!("  {name:<13} = {v}\n")
        })
        .collect()
}

fn add(e: Entity, w: &Words, st: &v1::AdminState) -> Result<Change, String> {
    let mut c = Change::default();
    let names: Vec<String> = w
        .names
        .iter()
        .cloned()
        .chain(cond(w, &["name", "names"]))
        .chain(w.sets.iter().filter(|(k, _)| k == "name" || k == "names").flat_map(|(_, v)| list(v)))
        .collect();
    let get = |keys: &[&str]| -> Option<String> {
        w.sets.iter().chain(&w.conds).find(|(k, _)| keys.contains(&k.as_str())).map(|(_, v)| v.clone())
    };
    let all_clusters: Vec<String> = st.clusters.iter().map(|c| c.name.clone()).collect();
    let clusters = get(&["cluster", "clusters"]).map(|v| list(&v)).unwrap_or(all_clusters);
    let limit_sets: Vec<(String, String)> =
        w.sets.iter().filter(|(k, v)| set_limit(&mut Default::default(), k, v).unwrap_or(false)).cloned().collect();
    let with_limits = |mut a: v1::AcctAssoc| -> Result<v1::AcctAssoc, String> {
        for (k, v) in &limit_sets {
            set_limit(&mut a, k, v)?;
        }
        Ok(a)
    };
    match e {
        Entity::Cluster => {
            for n in &names {
                if st.clusters.iter().any(|x| &x.name == n) {
                    c.out.push_str(&format!(" This cluster {n} already exists.  Not adding.\n"));
                    c.rc = 1;
                    continue;
                }
                c.put.clusters.push(v1::AcctCluster { name: n.clone(), ..Default::default() });
                c.put.assocs.extend(drover_proto::acct::root_assocs(n));
            }
            if !c.put.clusters.is_empty() {
                c.out.insert_str(
                    0,
                    &format!(
                        " Adding Cluster(s)\n{}",
                        c.put.clusters.iter().map(|x| format!("  Name           = {}\n", x.name)).collect::<String>()
                    ),
                );
            }
        }
        Entity::Account => {
            let parent = get(&["parent"]).unwrap_or_else(|| "root".into());
            for cl in &clusters {
                if !st.assocs.iter().any(|a| &a.cluster == cl && a.account == parent && a.user.is_empty()) {
                    c.err = format!(
                        " Parent account '{parent}' doesn't exist on cluster {cl}\n        Contact your admin to add this account.\n No associations created.\n"
                    );
                    c.rc = 1;
                    return Ok(c);
                }
            }
            let descr = get(&["description", "descr"]);
            let org = get(&["organization", "org"]);
            let mut assoc_lines = String::new();
            for n in &names {
                if !st.accounts.iter().any(|a| &a.name == n) {
                    c.put.accounts.push(v1::AcctAccount {
                        name: n.clone(),
                        description: descr.clone().unwrap_or_else(|| n.clone()),
                        organization: org.clone().unwrap_or_else(|| {
                            if parent == "root" {
                                n.clone()
                            } else {
                                parent.clone()
                            }
                        }),
                    });
                }
                for cl in &clusters {
                    if st.assocs.iter().any(|a| &a.cluster == cl && &a.account == n && a.user.is_empty()) {
                        continue;
                    }
                    let parent_qos = st
                        .assocs
                        .iter()
                        .find(|a| &a.cluster == cl && a.account == parent && a.user.is_empty())
                        .map(|a| a.qos.clone())
                        .unwrap_or_default();
                    c.put.assocs.push(with_limits(v1::AcctAssoc {
                        cluster: cl.clone(),
                        account: n.clone(),
                        parent: parent.clone(),
                        limits: Some(v1::AcctLimits { shares: Some(1), ..Default::default() }),
                        qos: parent_qos,
                        ..Default::default()
                    })?);
                    assoc_lines.push_str(&format!("  A = {n:<10} C = {cl:<10}\n"));
                }
            }
            if c.put.accounts.is_empty() && c.put.assocs.is_empty() {
                c.out = " Nothing new added.\n".into();
                c.rc = 1;
                return Ok(c);
            }
            c.out = format!(
                " Adding Account(s)\n{}",
                c.put.accounts.iter().map(|a| format!("  {}\n", a.name)).collect::<String>()
            );
            c.out.push_str(&format!(
                " Settings\n  Description     = {}\n  Organization    = {}\n",
                descr.as_deref().unwrap_or("Account Name"),
                org.as_deref().unwrap_or("Parent/Account Name")
            ));
            c.out.push_str(&format!(" Associations\n{assoc_lines} Settings\n  Parent        = {parent}\n"));
            c.out.push_str(&limit_lines(&limit_sets));
        }
        Entity::User => {
            let Some(accounts) = get(&["account", "accounts", "defaultaccount"]).map(|v| list(&v)) else {
                c.err = " Need name of account to add user to.\n".into();
                c.rc = 1;
                return Ok(c);
            };
            let accounts: Vec<String> = match get(&["account", "accounts"]) {
                Some(v) => list(&v),
                None => accounts,
            };
            for a in &accounts {
                if !st.accounts.iter().any(|x| &x.name == a) {
                    c.err = format!(
                        " This account '{a}' doesn't exist.\n        Contact your admin to add this account.\n No associations or wckeys created.\n"
                    );
                    c.rc = 1;
                    return Ok(c);
                }
            }
            let default_given = get(&["defaultaccount"]);
            let admin_given = get(&["adminlevel"]);
            let admin = match admin_given.as_deref().map(str::to_ascii_lowercase).as_deref() {
                None | Some("none") => "None",
                Some("operator") => "Operator",
                Some("administrator" | "admin") => "Administrator",
                Some(other) => return Err(format!(" Unknown AdminLevel: {other}")),
            };
            let partition = get(&["partition"]).unwrap_or_default();
            let mut lines = Vec::new();
            for n in &names {
                if !st.users.iter().any(|u| &u.name == n) {
                    c.put.users.push(v1::AcctUser {
                        name: n.clone(),
                        default_account: default_given.clone().unwrap_or_else(|| accounts[0].clone()),
                        admin_level: admin.into(),
                    });
                }
                let mut accts = accounts.clone();
                accts.sort();
                for a in &accts {
                    for cl in &clusters {
                        if st
                            .assocs
                            .iter()
                            .any(|x| &x.cluster == cl && &x.account == a && &x.user == n && x.partition == partition)
                        {
                            continue;
                        }
                        let parent =
                            st.assocs.iter().find(|x| &x.cluster == cl && &x.account == a && x.user.is_empty());
                        c.put.assocs.push(with_limits(v1::AcctAssoc {
                            cluster: cl.clone(),
                            account: a.clone(),
                            user: n.clone(),
                            partition: partition.clone(),
                            parent: a.clone(),
                            limits: Some(v1::AcctLimits { shares: Some(1), ..Default::default() }),
                            qos: parent.map(|p| p.qos.clone()).unwrap_or_default(),
                            ..Default::default()
                        })?);
                        lines.push(format!("  U = {n:<9} A = {a:<10} C = {cl:<10}\n"));
                    }
                }
            }
            if c.put.users.is_empty() && c.put.assocs.is_empty() {
                c.out = " Nothing new added.\n".into();
                c.rc = 1;
                return Ok(c);
            }
            c.out = format!(" Adding User(s)\n{}", names.iter().map(|n| format!("  {n}\n")).collect::<String>());
            if default_given.is_some() || admin_given.is_some() {
                c.out.push_str(" Settings =\n");
                if let Some(d) = &default_given {
                    c.out.push_str(&format!("  Default Account = {d}\n"));
                }
                if admin_given.is_some() {
                    c.out.push_str(&format!("  Admin Level     = {admin}\n"));
                }
            }
            c.out.push_str(&format!(" Associations =\n{} Non Default Settings\n", lines.concat()));
            c.out.push_str(&limit_lines(&limit_sets));
        }
        Entity::Qos => {
            let mut lines = String::new();
            for n in &names {
                if st.qos.iter().any(|q| &q.name == n) {
                    continue;
                }
                let mut q = v1::AcctQos {
                    name: n.clone(),
                    description: n.clone(),
                    preempt_mode: "cluster".into(),
                    usage_factor: 1.0,
                    ..Default::default()
                };
                for (k, v) in &w.sets {
                    if k != "name" && k != "names" {
                        set_qos(&mut q, k, v)?;
                    }
                }
                c.put.qos.push(q);
            }
            if c.put.qos.is_empty() {
                c.out = " Nothing new added.\n".into();
                c.rc = 1;
                return Ok(c);
            }
            let descr = get(&["description"]).unwrap_or_else(|| names[0].clone());
            lines.push_str(&format!("  {:<15}= {descr}\n", "Description"));
            // In sacctmgr's order: limits first, then preemption, priority and usage.
            let rank = |k: &str| match k {
                "flags" => 0,
                "gracetime" => 1,
                "preempt" => 3,
                "preemptmode" => 4,
                "priority" => 5,
                "usagefactor" => 6,
                "usagethreshold" | "usagethres" => 7,
                _ => 2,
            };
            let mut given: Vec<&(String, String)> =
                w.sets.iter().filter(|(k, _)| !matches!(k.as_str(), "name" | "names" | "description")).collect();
            given.sort_by_key(|(k, _)| rank(k));
            for (k, v) in given {
                let label = qos_label(k);
                if label == "Priority" {
                    lines.push_str(&format!("  {label:<25}= {v}\n"));
                } else {
                    lines.push_str(&format!("  {label:<15}= {v}\n"));
                }
            }
            c.out = format!(
                " Adding QOS(s)\n{} Settings\n{lines}",
                c.put.qos.iter().map(|q| format!("  {}\n", q.name)).collect::<String>()
            );
        }
        Entity::Assoc => return Err(" Use 'add user' or 'add account' to add associations".into()),
    }
    Ok(c)
}

/// How sacctmgr names a QoS setting when it lists what it adds.
fn qos_label(k: &str) -> String {
    match k {
        "maxjobsperuser" | "maxjobspu" => "MaxJobsPerUser".into(),
        "maxsubmitjobsperuser" | "maxsubmitpu" => "MaxSubmitJobsPerUser".into(),
        "maxtresperuser" | "maxtrespu" => "MaxTRESPerUser".into(),
        "priority" => "Priority".into(),
        "gracetime" => "GraceTime".into(),
        "preempt" => "Preempt".into(),
        "preemptmode" => "PreemptMode".into(),
        "usagefactor" => "UsageFactor".into(),
        "flags" => "Flags".into(),
        other => FIELDS.iter().find(|f| f.1.contains(&other)).map_or(other.to_string(), |f| f.2.to_string()),
    }
}

/// Sets one QoS field from `key=value` (`-1` clears a limit).
fn set_qos(q: &mut v1::AcctQos, key: &str, v: &str) -> Result<(), String> {
    let clear = v == "-1";
    let count = |v: &str| -> Result<Option<u32>, String> {
        if clear {
            Ok(None)
        } else {
            v.parse().map(Some).map_err(|_| format!(" Bad value for {key}: {v}"))
        }
    };
    match key {
        "description" => q.description = v.to_string(),
        "priority" => q.priority = count(v)?.unwrap_or(0),
        // Seconds, as Slurm's sacctmgr reads it (a plain number).
        "gracetime" => q.grace_time_secs = u64::from(count(v)?.unwrap_or(0)),
        "preempt" => q.preempt = if clear { Vec::new() } else { list(v) },
        "preemptmode" => q.preempt_mode = v.to_ascii_lowercase(),
        "flags" => q.flags = if clear { Vec::new() } else { list(v) },
        "usagefactor" => q.usage_factor = v.parse().map_err(|_| format!(" Bad UsageFactor: {v}"))?,
        "usagethreshold" | "usagethres" => q.usage_threshold = if clear { None } else { v.parse().ok() },
        "maxjobsperuser" | "maxjobspu" => q.max_jobs_per_user = count(v)?,
        "maxsubmitjobsperuser" | "maxsubmitpu" => q.max_submit_per_user = count(v)?,
        "maxtresperuser" | "maxtrespu" => {
            q.max_tres_per_user = if clear { String::new() } else { v.to_ascii_lowercase() }
        }
        "maxjobsperaccount" | "maxjobspa" => q.max_jobs_per_account = count(v)?,
        "maxsubmitjobsperaccount" | "maxsubmitpa" => q.max_submit_per_account = count(v)?,
        "maxtresperaccount" | "maxtrespa" => {
            q.max_tres_per_account = if clear { String::new() } else { v.to_ascii_lowercase() }
        }
        "mintres" | "mintresperjob" => q.min_tres = if clear { String::new() } else { v.to_ascii_lowercase() },
        other => {
            let mut a = v1::AcctAssoc { limits: q.limits.take(), ..Default::default() };
            let known = set_limit(&mut a, other, v)?;
            q.limits = a.limits;
            if !known || matches!(other, "fairshare" | "share" | "qos" | "defaultqos") {
                return Err(format!(" Unknown option: {key}={v}\n Use keyword 'where' to modify condition"));
            }
        }
    }
    Ok(())
}

type Sets = Vec<(String, String)>;

/// A modify's `set` values: those of the entity itself (`own` keys) and association limits;
/// `Err`: the first that is neither.
fn split_sets(w: &Words, own: &[&str]) -> Result<(Sets, Sets), (String, String)> {
    let (mut mine, mut limits) = (Vec::new(), Vec::new());
    for (k, v) in &w.sets {
        if own.contains(&k.as_str()) {
            mine.push((k.clone(), v.clone()));
        } else if set_limit(&mut Default::default(), k, v).unwrap_or(false) {
            limits.push((k.clone(), v.clone()));
        } else {
            return Err((k.clone(), v.clone()));
        }
    }
    Ok((mine, limits))
}

fn modify(e: Entity, w: &Words, st: &v1::AdminState) -> Result<Change, String> {
    let mut c = Change::default();
    if w.sets.is_empty() {
        return Err(" You didn't give me anything to set".into());
    }
    let names: Vec<String> = w.names.iter().cloned().chain(cond(w, &["name", "names"])).collect();
    let clusters = cond(w, &["cluster", "clusters"]);
    let in_cluster = |cl: &str| clusters.is_empty() || clusters.iter().any(|x| x == cl);
    let unknown = |k: &str, v: &str| {
        let given = w
            .set_words
            .iter()
            .find(|g| g.split_once('=').is_some_and(|(gk, _)| gk.trim().eq_ignore_ascii_case(k)))
            .cloned()
            .unwrap_or_else(|| format!("{k}={v}"));
        format!(" Unknown option: {given}\n Use keyword 'where' to modify condition")
    };
    match e {
        Entity::User => {
            let users: Vec<String> = names.iter().cloned().chain(cond(w, &["user", "users"])).collect();
            let accounts = cond(w, &["account", "accounts"]);
            let (user_sets, assoc_sets) = match split_sets(w, &["defaultaccount", "adminlevel"]) {
                Ok(s) => s,
                Err((k, v)) => {
                    c.err = unknown(&k, &v) + "\n";
                    c.rc = 1;
                    return Ok(c);
                }
            };
            if !user_sets.is_empty() {
                for u in st.users.iter().filter(|u| users.contains(&u.name)) {
                    let mut u = u.clone();
                    for (k, v) in &user_sets {
                        if k == "defaultaccount" {
                            u.default_account = v.clone();
                        } else {
                            u.admin_level = match v.to_ascii_lowercase().as_str() {
                                "operator" => "Operator".into(),
                                "administrator" | "admin" => "Administrator".into(),
                                _ => "None".into(),
                            };
                        }
                    }
                    c.put.users.push(u);
                }
                if !c.put.users.is_empty() {
                    c.out.push_str(" Modified users...\n");
                    for u in &c.put.users {
                        c.out.push_str(&format!("  {}\n", u.name));
                    }
                }
            }
            if !assoc_sets.is_empty() {
                let mut lines = String::new();
                for a in st.assocs.iter().filter(|a| {
                    !a.user.is_empty()
                        && users.contains(&a.user)
                        && in_cluster(&a.cluster)
                        && (accounts.is_empty() || accounts.contains(&a.account))
                }) {
                    let mut a = a.clone();
                    for (k, v) in &assoc_sets {
                        set_limit(&mut a, k, v)?;
                    }
                    lines.push_str(&format!("  C = {:<10} A = {:<20} U = {:<9}\n", a.cluster, a.account, a.user));
                    c.put.assocs.push(a);
                }
                if !lines.is_empty() {
                    c.out.push_str(&format!(" Modified user associations...\n{lines}"));
                }
            }
        }
        Entity::Account => {
            let accounts: Vec<String> = names.iter().cloned().chain(cond(w, &["account", "accounts"])).collect();
            let (acct_sets, assoc_sets) = match split_sets(w, &["description", "organization"]) {
                Ok(s) => s,
                Err((k, v)) => {
                    c.err = unknown(&k, &v) + "\n";
                    c.rc = 1;
                    return Ok(c);
                }
            };
            if !acct_sets.is_empty() {
                for a in st.accounts.iter().filter(|a| accounts.contains(&a.name)) {
                    let mut a = a.clone();
                    for (k, v) in &acct_sets {
                        if k == "description" {
                            a.description = v.clone();
                        } else {
                            a.organization = v.clone();
                        }
                    }
                    c.put.accounts.push(a);
                }
                if !c.put.accounts.is_empty() {
                    c.out.push_str(" Modified accounts...\n");
                    for a in &c.put.accounts {
                        c.out.push_str(&format!("  {}\n", a.name));
                    }
                }
            }
            if !assoc_sets.is_empty() {
                let mut lines = String::new();
                for a in st
                    .assocs
                    .iter()
                    .filter(|a| a.user.is_empty() && accounts.contains(&a.account) && in_cluster(&a.cluster))
                {
                    let mut a = a.clone();
                    for (k, v) in &assoc_sets {
                        set_limit(&mut a, k, v)?;
                    }
                    lines.push_str(&format!("  C = {:<10} A = {} of {}\n", a.cluster, a.account, a.parent));
                    c.put.assocs.push(a);
                }
                if !lines.is_empty() {
                    c.out.push_str(&format!(" Modified account associations...\n{lines}"));
                }
            }
        }
        Entity::Qos => {
            for q in st.qos.iter().filter(|q| names.contains(&q.name)) {
                let mut q = q.clone();
                for (k, v) in &w.sets {
                    if let Err(e) = set_qos(&mut q, k, v) {
                        c.err = e + "\n";
                        c.rc = 1;
                        return Ok(c);
                    }
                }
                c.put.qos.push(q);
            }
            if !c.put.qos.is_empty() {
                c.out = format!(
                    " Modified qos...\n{}",
                    c.put.qos.iter().map(|q| format!("  {}\n", q.name)).collect::<String>()
                );
            }
        }
        Entity::Cluster | Entity::Assoc => {
            return Err(" Modify cluster and association limits through 'modify account' or 'modify user'".into())
        }
    }
    if c.out.is_empty() && c.err.is_empty() {
        c.out = " Nothing modified\n".into();
        c.rc = 1;
    }
    Ok(c)
}

fn delete(e: Entity, w: &Words, st: &v1::AdminState) -> Result<Change, String> {
    let mut c = Change::default();
    let names: Vec<String> = w.names.iter().cloned().chain(cond(w, &["name", "names"])).collect();
    match e {
        Entity::User => {
            let users: Vec<String> = names.iter().cloned().chain(cond(w, &["user", "users"])).collect();
            let accounts = cond(w, &["account", "accounts"]);
            if accounts.is_empty() {
                for u in st.users.iter().filter(|u| users.contains(&u.name)) {
                    c.delete.users.push(u.clone());
                    c.delete.assocs.extend(st.assocs.iter().filter(|a| a.user == u.name).cloned());
                }
                if !c.delete.users.is_empty() {
                    c.out = format!(
                        " Deleting users...\n{}",
                        c.delete.users.iter().map(|u| format!("  {}\n", u.name)).collect::<String>()
                    );
                }
            } else {
                let mut lines = String::new();
                for a in st.assocs.iter().filter(|a| users.contains(&a.user) && accounts.contains(&a.account)) {
                    lines.push_str(&format!("  C = {:<10} A = {:<20} U = {:<9}\n", a.cluster, a.account, a.user));
                    c.delete.assocs.push(a.clone());
                }
                if !lines.is_empty() {
                    c.out = format!(" Deleting user associations...\n{lines}");
                }
            }
        }
        Entity::Account => {
            let accounts: Vec<String> = names.iter().cloned().chain(cond(w, &["account", "accounts"])).collect();
            if accounts.iter().any(|a| a == "root") {
                return Err(" You can't delete the root account".into());
            }
            for a in st.accounts.iter().filter(|a| accounts.contains(&a.name)) {
                if let Some(child) =
                    st.assocs.iter().find(|x| x.user.is_empty() && x.parent == a.name && x.account != a.name)
                {
                    return Err(format!(
                        " Account '{}' has sub-account '{}': delete or move the sub-accounts first",
                        a.name, child.account
                    ));
                }
                c.delete.accounts.push(a.clone());
                c.delete.assocs.extend(st.assocs.iter().filter(|x| x.account == a.name).cloned());
                // Users whose default account it was have none now, as in Slurm.
                for u in st.users.iter().filter(|u| u.default_account == a.name) {
                    let mut u = u.clone();
                    u.default_account.clear();
                    c.put.users.push(u);
                }
            }
            if !c.delete.accounts.is_empty() {
                c.out = format!(
                    " Deleting accounts...\n{}",
                    c.delete.accounts.iter().map(|a| format!("  {}\n", a.name)).collect::<String>()
                );
            }
        }
        Entity::Qos => {
            for q in st.qos.iter().filter(|q| names.contains(&q.name)) {
                if q.name == "normal" {
                    return Err(" You can't delete the default QOS 'normal'".into());
                }
                c.delete.qos.push(q.clone());
            }
            // Associations that listed it no longer do.
            for a in st.assocs.iter().filter(|a| a.qos.iter().any(|x| names.contains(x))) {
                let mut a = a.clone();
                a.qos.retain(|x| !names.contains(x));
                c.put.assocs.push(a);
            }
            if !c.delete.qos.is_empty() {
                c.out = format!(
                    " Deleting QOS(s)...\n{}",
                    c.delete.qos.iter().map(|q| format!("  {}\n", q.name)).collect::<String>()
                );
            }
        }
        Entity::Cluster => {
            for cl in st.clusters.iter().filter(|cl| names.contains(&cl.name)) {
                c.delete.clusters.push(cl.clone());
                c.delete.assocs.extend(st.assocs.iter().filter(|a| a.cluster == cl.name).cloned());
            }
            if !c.delete.clusters.is_empty() {
                c.out = format!(
                    " Deleting clusters...\n{}",
                    c.delete.clusters.iter().map(|x| format!("  {}\n", x.name)).collect::<String>()
                );
            }
        }
        Entity::Assoc => return Err(" Use 'delete user' or 'delete account' to remove associations".into()),
    }
    if c.out.is_empty() {
        c.out = " Nothing deleted\n".into();
        c.rc = 1;
    }
    Ok(c)
}

fn is_empty(s: &v1::AdminState) -> bool {
    s.clusters.is_empty() && s.accounts.is_empty() && s.users.is_empty() && s.qos.is_empty() && s.assocs.is_empty()
}

/// A client of the accounting service: over its local socket where it runs here (changes
/// need it), else over TCP.
/// A client of the cluster's accounting: its local socket, else its TCP address.
pub(crate) async fn connect(
    cfg: &drover_model::conf::Config,
) -> Result<AccountingClient<tonic::transport::Channel>, String> {
    common::accounting(cfg).await
}

pub fn main(args: Vec<String>) -> i32 {
    let mut o = Opts::default();
    let mut words: Vec<String> = Vec::new();
    // Options may come anywhere, before or after the command (getopt permutes): `sacctmgr
    // show assoc -P` is parsable. `--` ends them.
    let mut options_end = false;
    for a in args {
        if a == "--" && !options_end {
            options_end = true;
            continue;
        }
        if options_end || !a.starts_with('-') || a == "-" {
            words.push(a);
            continue;
        }
        match a.as_str() {
            "-i" | "--immediate" => o.immediate = true,
            "-n" | "--noheader" => o.noheader = true,
            "-p" | "--parsable" => o.parsable = Some(true),
            "-P" | "--parsable2" => o.parsable = Some(false),
            "-Q" | "--quiet" => o.quiet = true,
            "-r" | "--readonly" | "-v" | "--verbose" => {}
            "-s" | "--associations" => o.with_assoc = true,
            "-h" | "--help" | "--usage" => return crate::help::print("sacctmgr", false),
            "-V" | "--version" => {
                crate::common::print_version();
                return 0;
            }
            other => {
                // Combined short flags (`-iP`).
                let flags: Vec<char> = other.chars().skip(1).collect();
                if other.starts_with("--") || flags.iter().any(|f| !"inpPQrsv".contains(*f)) {
                    eprintln!("sacctmgr: unrecognized option '{other}'");
                    eprintln!("Try \"sacctmgr --help\" for more information");
                    return 1;
                }
                for f in flags {
                    match f {
                        'i' => o.immediate = true,
                        'n' => o.noheader = true,
                        'p' => o.parsable = Some(true),
                        'P' => o.parsable = Some(false),
                        'Q' => o.quiet = true,
                        's' => o.with_assoc = true,
                        _ => {}
                    }
                }
            }
        }
    }
    let Some(verb) = words.first().map(|v| v.to_ascii_lowercase()) else {
        eprintln!("sacctmgr: error: Drover's sacctmgr takes its command on the command line (no interactive mode yet)");
        return 1;
    };
    let verb = match verb.as_str() {
        "add" | "create" => "add",
        "modify" | "update" => "modify",
        "delete" | "remove" => "delete",
        "show" | "list" => "show",
        "help" => return crate::help::print("sacctmgr", false),
        "version" => {
            crate::common::print_version();
            return 0;
        }
        other => {
            eprintln!("sacctmgr: error: Invalid Input: {other}");
            return 1;
        }
    };
    let Some(e) = words.get(1).and_then(|w| entity(w)) else {
        if verb == "show" {
            eprintln!("{ENTITIES}");
        } else {
            eprintln!(" Invalid input: no valid entity given to {verb}");
        }
        return 1;
    };
    let mut w = parse_words(&words[2..], verb == "add");
    if o.with_assoc {
        w.flags.insert("withassoc".into());
    }
    let cfg = match common::config_for("sacctmgr") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if cfg.accounting_addr().is_none() {
        eprintln!("sacctmgr: error: Slurm accounting storage is disabled");
        return 1;
    }
    common::runtime().block_on(async move {
        let mut client = match connect(&cfg).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("sacctmgr: error: {e}");
                return 1;
            }
        };
        let st = match client.admin_get(v1::Empty {}).await {
            Ok(r) => r.into_inner(),
            Err(s) => {
                eprintln!("sacctmgr: error: Problem talking to the database: {}", s.message());
                return 1;
            }
        };
        if verb == "show" {
            return match show(&o, e, &w, &st) {
                Ok(()) => 0,
                Err(msg) => {
                    eprintln!(" {msg}");
                    1
                }
            };
        }
        let change = match verb {
            "add" => add(e, &w, &st),
            "modify" => modify(e, &w, &st),
            _ => delete(e, &w, &st),
        };
        let c = match change {
            Ok(c) => c,
            Err(msg) => {
                eprintln!("{msg}");
                return 1;
            }
        };
        if !o.quiet {
            print!("{}", c.out);
        }
        eprint!("{}", c.err);
        if c.rc != 0 && is_empty(&c.put) && is_empty(&c.delete) {
            return c.rc;
        }
        if !o.immediate {
            // Without -i Slurm asks; with no terminal to ask, nothing is changed.
            use std::io::IsTerminal;
            if !std::io::stdin().is_terminal() {
                println!(" Changes discarded (no terminal to confirm them; use -i to commit at once)");
                return 1;
            }
            print!("Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): ");
            use std::io::Write;
            let _ = std::io::stdout().flush();
            let mut answer = String::new();
            let _ = std::io::stdin().read_line(&mut answer);
            if !answer.trim().eq_ignore_ascii_case("y") {
                println!(" Changes Discarded");
                return 0;
            }
        }
        if !is_empty(&c.delete) {
            if let Err(s) = client.admin_delete(c.delete.clone()).await {
                eprintln!("sacctmgr: error: {}", s.message());
                return 1;
            }
        }
        if !is_empty(&c.put) {
            if let Err(s) = client.admin_put(c.put.clone()).await {
                eprintln!("sacctmgr: error: {}", s.message());
                return 1;
            }
        }
        c.rc
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str, add: bool) -> Words {
        parse_words(&s.split_whitespace().map(String::from).collect::<Vec<_>>(), add)
    }

    #[test]
    fn words_split_into_names_conditions_and_values() {
        let w = words("alice,bob where account=physics set MaxJobs=3 format=user%20", false);
        assert_eq!(w.names, ["alice", "bob"]);
        assert_eq!(w.conds, [("account".to_string(), "physics".to_string())]);
        assert_eq!(w.sets, [("maxjobs".to_string(), "3".to_string())]);
        assert_eq!(w.format.as_deref(), Some("user%20"));
        let a = words("physics Description=x parent=root", true);
        assert_eq!(a.sets.len(), 2);
    }

    #[test]
    fn limits_set_and_clear() {
        let mut a = v1::AcctAssoc::default();
        assert!(set_limit(&mut a, "maxwall", "1:00:00").unwrap());
        assert!(set_limit(&mut a, "grptres", "CPU=8").unwrap());
        assert_eq!(assoc_field(&a, "maxwall"), "01:00:00");
        assert_eq!(assoc_field(&a, "grptres"), "cpu=8");
        assert!(set_limit(&mut a, "maxwall", "-1").unwrap());
        assert_eq!(assoc_field(&a, "maxwall"), "");
        assert!(!set_limit(&mut a, "bogus", "1").unwrap());
    }
}

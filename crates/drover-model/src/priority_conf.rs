//! `slurm.conf`'s priority keys: `PriorityType`, the `PriorityWeight*` weights,
//! `PriorityMaxAge`, `PriorityDecayHalfLife`, `PriorityCalcPeriod`, `PriorityFavorSmall`,
//! `PriorityUsageResetPeriod` and `PriorityFlags`.

use serde::{Deserialize, Serialize};

/// `PriorityUsageResetPeriod`: when usage starts from nothing again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum UsageReset {
    #[default]
    None,
    Now,
    Daily,
    Weekly,
    Monthly,
    Quarterly,
    Yearly,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityConf {
    /// `PriorityType=priority/multifactor` (else `priority/basic`: submit order).
    pub multifactor: bool,
    pub weight_age: u32,
    pub weight_assoc: u32,
    pub weight_fairshare: u32,
    pub weight_jobsize: u32,
    pub weight_partition: u32,
    pub weight_qos: u32,
    /// Seconds.
    pub max_age: u64,
    pub decay_half_life: u64,
    pub calc_period: u64,
    pub favor_small: bool,
    pub usage_reset: UsageReset,
    /// `PriorityFlags` as given (upper-cased), the ones Drover honours among them.
    pub flags: Vec<String>,
}

impl Default for PriorityConf {
    fn default() -> Self {
        PriorityConf {
            multifactor: false,
            weight_age: 0,
            weight_assoc: 0,
            weight_fairshare: 0,
            weight_jobsize: 0,
            weight_partition: 0,
            weight_qos: 0,
            max_age: 7 * 86400,
            decay_half_life: 7 * 86400,
            calc_period: 300,
            favor_small: false,
            usage_reset: UsageReset::None,
            flags: Vec::new(),
        }
    }
}

/// Flags Drover honours (others are accepted and reported as not supported).
pub const HONOURED_FLAGS: &[&str] = &["NO_NORMAL_ALL", "NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS"];

/// The keys this module reads, lower-cased.
pub const KEYS: &[&str] = &[
    "prioritytype",
    "priorityweightage",
    "priorityweightassoc",
    "priorityweightfairshare",
    "priorityweightjobsize",
    "priorityweightpartition",
    "priorityweightqos",
    "prioritymaxage",
    "prioritydecayhalflife",
    "prioritycalcperiod",
    "priorityfavorsmall",
    "priorityusageresetperiod",
    "priorityflags",
];

impl PriorityConf {
    /// Whether `flag` is set (`NO_NORMAL_ALL` implies each `NO_NORMAL_*`).
    pub fn flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
            || (flag.starts_with("NO_NORMAL_") && self.flags.iter().any(|f| f == "NO_NORMAL_ALL"))
    }

    /// Takes one key (lower-cased) and its value; Err: what was wrong. Returns the flags
    /// not honoured (to report).
    pub fn set(&mut self, key: &str, v: &str) -> Result<Vec<String>, String> {
        let num = |v: &str| v.trim().parse::<u32>().map_err(|_| format!("expected a number, found `{v}`"));
        // Time forms of Slurm (`7-0`, `14-00:00:00`, `00:05:00`); a bare number is minutes.
        let time = |v: &str| -> Result<u64, String> {
            crate::duration::parse_time_limit(v)
                .map_err(|_| format!("expected a time (`7-0`, `00:05:00`, minutes), found `{v}`"))
                .map(|t| t.unwrap_or(0))
        };
        match key {
            "prioritytype" => {
                self.multifactor = match v.to_ascii_lowercase().as_str() {
                    "priority/multifactor" => true,
                    "priority/basic" => false,
                    _ => return Err(format!("expected priority/basic or priority/multifactor, found `{v}`")),
                }
            }
            "priorityweightage" => self.weight_age = num(v)?,
            "priorityweightassoc" => self.weight_assoc = num(v)?,
            "priorityweightfairshare" => self.weight_fairshare = num(v)?,
            "priorityweightjobsize" => self.weight_jobsize = num(v)?,
            "priorityweightpartition" => self.weight_partition = num(v)?,
            "priorityweightqos" => self.weight_qos = num(v)?,
            "prioritymaxage" => self.max_age = time(v)?,
            "prioritydecayhalflife" => self.decay_half_life = time(v)?,
            "prioritycalcperiod" => self.calc_period = time(v)?.max(1),
            "priorityfavorsmall" => {
                self.favor_small = match v.to_ascii_lowercase().as_str() {
                    "yes" | "1" | "true" => true,
                    "no" | "0" | "false" => false,
                    _ => return Err(format!("expected YES or NO, found `{v}`")),
                }
            }
            "priorityusageresetperiod" => {
                self.usage_reset = match v.to_ascii_uppercase().as_str() {
                    "NONE" => UsageReset::None,
                    "NOW" => UsageReset::Now,
                    "DAILY" => UsageReset::Daily,
                    "WEEKLY" => UsageReset::Weekly,
                    "MONTHLY" => UsageReset::Monthly,
                    "QUARTERLY" => UsageReset::Quarterly,
                    "YEARLY" => UsageReset::Yearly,
                    _ => {
                        return Err(format!(
                            "expected NONE, NOW, DAILY, WEEKLY, MONTHLY, QUARTERLY or YEARLY, found `{v}`"
                        ))
                    }
                }
            }
            "priorityflags" => {
                self.flags = v.split(',').map(|f| f.trim().to_ascii_uppercase()).filter(|f| !f.is_empty()).collect();
                return Ok(self.flags.iter().filter(|f| !HONOURED_FLAGS.contains(&f.as_str())).cloned().collect());
            }
            _ => return Err(format!("not a priority key: {key}")),
        }
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_as_slurm_writes_them() {
        let mut p = PriorityConf::default();
        p.set("prioritytype", "priority/multifactor").unwrap();
        p.set("prioritydecayhalflife", "14-0").unwrap();
        p.set("prioritycalcperiod", "1").unwrap();
        p.set("prioritymaxage", "1-00:00:00").unwrap();
        p.set("priorityweightfairshare", "10000").unwrap();
        let not = p.set("priorityflags", "NO_NORMAL_QOS,CALCULATE_RUNNING").unwrap();
        assert!(p.multifactor);
        assert_eq!((p.decay_half_life, p.calc_period, p.max_age), (14 * 86400, 60, 86400));
        assert_eq!(p.weight_fairshare, 10000);
        assert_eq!(not, ["CALCULATE_RUNNING"]);
        assert!(p.flag("NO_NORMAL_QOS") && !p.flag("NO_NORMAL_PART"));
        assert!(p.set("priorityusageresetperiod", "sometimes").is_err());
    }
}

//! The values every section writes the same way: page sizes, byte counts, addresses,
//! associativities, what a structure serves, switches, one-or-many lists; each read with one
//! message for anything else.

use super::*;

/// A page size in bytes (a power of two), or `unmapped` (the address bypasses translation,
/// like MIPS kseg0/kseg1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageSize {
    Size(u64),
    Unmapped,
}

impl PageSize {
    /// Parse `4k`, `4K`, `4KiB`, `2M`, `1G`, `8192` or `unmapped` (sizes are powers of two of at
    /// least 2 bytes).
    pub fn parse(s: &str) -> std::result::Result<PageSize, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("unmapped") {
            return Ok(PageSize::Unmapped);
        }
        match parse_bytes(t) {
            Some(n) if n >= 2 && n.is_power_of_two() => Ok(PageSize::Size(n)),
            _ => Err(format!("'{s}' is not a page size (e.g. 4k, 2M, 1G)")),
        }
    }

    /// A page size given as a number of bytes.
    fn from_int(n: i64) -> std::result::Result<PageSize, String> {
        match u64::try_from(n) {
            Ok(n) if n >= 2 && n.is_power_of_two() => Ok(PageSize::Size(n)),
            _ => Err(format!(
                "{n} is not a page size (a power of two of at least 2 bytes, e.g. 4096)"
            )),
        }
    }

    /// log2 of the size; `None` when unmapped.
    pub fn shift(self) -> Option<u32> {
        match self {
            PageSize::Size(n) => Some(n.trailing_zeros()),
            PageSize::Unmapped => None,
        }
    }

    /// Human form: `4K`, `2M`, `1G`, `512` or `unmapped`.
    pub fn label(self) -> String {
        match self {
            PageSize::Unmapped => "unmapped".into(),
            PageSize::Size(n) if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{}G", n >> 30),
            PageSize::Size(n) if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}M", n >> 20),
            PageSize::Size(n) if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}K", n >> 10),
            PageSize::Size(n) => n.to_string(),
        }
    }
}

impl Serialize for PageSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.label())
    }
}

impl<'de> Deserialize<'de> for PageSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match StrOrInt::deserialize(d)? {
            StrOrInt::Str(s) => PageSize::parse(&s).map_err(de::Error::custom),
            StrOrInt::Int(n) => PageSize::from_int(n).map_err(de::Error::custom),
        }
    }
}

/// An integer or a string (sizes, associativities, addresses), with a clear message for
/// anything else.
pub(super) enum StrOrInt {
    Int(i64),
    Str(String),
}

impl<'de> Deserialize<'de> for StrOrInt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = StrOrInt;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer or a string")
            }

            fn visit_i64<E: de::Error>(self, n: i64) -> std::result::Result<StrOrInt, E> {
                Ok(StrOrInt::Int(n))
            }

            fn visit_u64<E: de::Error>(self, n: u64) -> std::result::Result<StrOrInt, E> {
                i64::try_from(n)
                    .map(StrOrInt::Int)
                    .map_err(|_| E::custom(format!("{n} is too large")))
            }

            fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<StrOrInt, E> {
                Ok(StrOrInt::Str(s.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Parse a byte count: `64k`, `64K`, `64KiB`, `64KB`, `2M`, `1G`, `8192` (binary units).
/// `None` when it is not one (or overflows).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let lower = s.trim().to_ascii_lowercase();
    let body = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, mult) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1u64 << 10),
        Some('m') => (&body[..body.len() - 1], 1 << 20),
        Some('g') => (&body[..body.len() - 1], 1 << 30),
        _ => (body, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// A byte count as a machine writes one (`2k`, 2048: [`Bytes`]), for a field that is a
/// plain `u64` (`#[serde(deserialize_with = "crate::config::byte_count")]`).
pub(crate) fn byte_count<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    Bytes::deserialize(d).map(|b| b.0)
}

/// A byte count, written as a TOML integer or a string such as `"64KiB"` (see
/// [`parse_bytes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let n = self.0;
        let text = if n >= 1 << 30 && n.is_multiple_of(1 << 30) {
            format!("{}GiB", n >> 30)
        } else if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
            format!("{}MiB", n >> 20)
        } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
            format!("{}KiB", n >> 10)
        } else {
            return s.serialize_u64(n);
        };
        s.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match StrOrInt::deserialize(d)? {
            StrOrInt::Int(n) => u64::try_from(n)
                .map(Bytes)
                .map_err(|_| de::Error::custom("a size must not be negative")),
            StrOrInt::Str(s) => parse_bytes(&s).map(Bytes).ok_or_else(|| {
                de::Error::custom(format!("'{s}' is not a size (e.g. 64KiB, 16, 2M)"))
            }),
        }
    }
}

/// Parse an address given as a TOML integer or as a string (`"0xffff800000000000"`, decimal).
pub fn parse_addr(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim().replace('_', "");
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse::<u64>(),
    };
    r.map_err(|_| format!("'{s}' is not an address (use an integer or a \"0x…\" string)"))
}

pub(super) fn addr<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    match StrOrInt::deserialize(d)? {
        StrOrInt::Int(n) => u64::try_from(n).map_err(|_| de::Error::custom("negative address")),
        StrOrInt::Str(s) => parse_addr(&s).map_err(de::Error::custom),
    }
}

// Addresses are written as hex strings: TOML integers stop at i64::MAX.
pub(super) fn ser_addr<S: serde::Serializer>(
    a: &u64,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{a:#x}"))
}

pub(super) fn ser_opt_addr<S: serde::Serializer>(
    a: &Option<u64>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match a {
        Some(a) => ser_addr(a, s),
        None => s.serialize_none(),
    }
}

pub(super) fn opt_addr<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<u64>, D::Error> {
    addr(d).map(Some)
}

pub(super) fn yes() -> bool {
    true
}

pub(super) fn is_false(b: &bool) -> bool {
    !*b
}

/// A switch written `true`/`false` or, as in a flag, `yes`/`no`.
pub(super) fn yes_no<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    struct V;
    impl de::Visitor<'_> for V {
        type Value = bool;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("yes or no (or true, false)")
        }

        fn visit_bool<E: de::Error>(self, b: bool) -> std::result::Result<bool, E> {
            Ok(b)
        }

        fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<bool, E> {
            match s.trim().to_ascii_lowercase().as_str() {
                "yes" | "true" | "on" => Ok(true),
                "no" | "false" | "off" => Ok(false),
                _ => Err(E::custom(format!("'{s}' is not yes or no"))),
            }
        }
    }
    d.deserialize_any(V)
}

pub(super) fn one_or_many<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<PageSize>, D::Error> {
    one_or_list(
        d,
        "a page size or a list of them (e.g. \"4k\" or [\"4k\", \"2M\"])",
    )
}

/// A name or a list of names.
pub(super) fn names<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    one_or_list(d, "a TLB's name or a list of them")
}

/// One `T` (a string or an integer) or a list of them; `what` says what is expected. Each
/// item is read by `T`'s own deserializer, so its messages are `T`'s.
pub(super) fn one_or_list<'de, D, T>(
    d: D,
    what: &'static str,
) -> std::result::Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    use de::IntoDeserializer;
    struct OneOrList<T>(&'static str, std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> de::Visitor<'de> for OneOrList<T> {
        type Value = Vec<T>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(self.0)
        }

        fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Self::Value, E> {
            T::deserialize(s.into_deserializer()).map(|t| vec![t])
        }

        fn visit_i64<E: de::Error>(self, n: i64) -> std::result::Result<Self::Value, E> {
            T::deserialize(n.into_deserializer()).map(|t| vec![t])
        }

        fn visit_u64<E: de::Error>(self, n: u64) -> std::result::Result<Self::Value, E> {
            T::deserialize(n.into_deserializer()).map(|t| vec![t])
        }

        fn visit_seq<A: de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut v = Vec::new();
            while let Some(t) = seq.next_element::<T>()? {
                v.push(t);
            }
            Ok(v)
        }
    }
    d.deserialize_any(OneOrList(what, std::marker::PhantomData))
}

/// One name as a string, several as a list.
pub(super) fn ser_names<S: serde::Serializer>(
    v: &[String],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match v {
        [one] => s.serialize_str(one),
        _ => v.serialize(s),
    }
}

/// Associativity: a number of ways, or `"full"` (ways = entries).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ways {
    #[default]
    Full,
    N(usize),
}

impl Serialize for Ways {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Ways::Full => s.serialize_str("full"),
            Ways::N(n) => s.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for Ways {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match StrOrInt::deserialize(d)? {
            StrOrInt::Str(s) if s.eq_ignore_ascii_case("full") || s.eq_ignore_ascii_case("fa") => {
                Ok(Ways::Full)
            }
            StrOrInt::Str(s) => match s.parse::<usize>() {
                Ok(n) => Ok(Ways::N(n)),
                Err(_) => Err(de::Error::custom(format!(
                    "'{s}' is not an associativity (a number of ways, or \"full\")"
                ))),
            },
            StrOrInt::Int(n) => usize::try_from(n)
                .map(Ways::N)
                .map_err(|_| de::Error::custom("ways must be positive")),
        }
    }
}

/// Which references a structure translates.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Serves {
    Instruction,
    Data,
    #[default]
    Unified,
}

impl Serves {
    /// What a structure named `name` serves when its config does not say: a name starting
    /// with `i` serves instructions (`itlb`), with `d` data (`dtlb`), anything else is unified
    /// (`tlb`, `stlb`). The one rule for every way a machine is written (a `[[tlb]]` table,
    /// `--tlb`, `--set`), so that `dtlb` means a data TLB everywhere.
    pub fn for_name(name: &str) -> Serves {
        match name.chars().next() {
            Some('i') | Some('I') => Serves::Instruction,
            Some('d') | Some('D') => Serves::Data,
            _ => Serves::Unified,
        }
    }

    /// Does this structure translate references of `kind` (fetch, load or store)?
    pub fn serves(self, kind: crate::event::Kind) -> bool {
        match self {
            Serves::Unified => true,
            Serves::Instruction => kind == crate::event::Kind::Fetch,
            Serves::Data => kind != crate::event::Kind::Fetch,
        }
    }
}

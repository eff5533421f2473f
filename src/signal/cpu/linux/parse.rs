//! The formats of cgroup values: integers, CPU lists (`0-3,5`), the `usage_usec` line of
//! `cpu.stat`.

/// A value that does not parse (see [`parse_uint`] and [`for_each_cpu`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ParseError;

/// The `usage_usec` value of a v2 `cpu.stat` (flat keyed: one `key value` pair per line).
pub(super) fn cpu_stat_usage_usec(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("usage_usec "))
        .and_then(|value| parse_uint(value).ok())
}

/// Parses a cgroup integer with go-zero's `parseUint` semantics: a decimal `u64`; a negative number
/// of any magnitude (`-1`, `-18446744073709551616`) parses as 0, which turns v1's "no quota" `-1`
/// into 0; anything else is an error. Surrounding whitespace (the trailing newline) is trimmed.
pub(crate) fn parse_uint(s: &str) -> Result<u64, ParseError> {
    parse_uint_exact(s.trim())
}

/// [`parse_uint`] without trimming, as go-zero applies it to the elements of a list.
///
/// Like Go's `strconv.ParseUint` (which go-zero calls first) it accepts only ASCII digits: no `+`,
/// no whitespace, no `_`. Like go-zero's fallback to `ParseInt` it maps `-` followed by digits to
/// 0, except when the number's value is zero (`-0`): `ParseInt` accepts that as 0, which is not
/// negative, so go-zero reports the original error.
fn parse_uint_exact(s: &str) -> Result<u64, ParseError> {
    let all_digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if let Some(magnitude) = s.strip_prefix('-') {
        return if all_digits(magnitude) && magnitude.bytes().any(|b| b != b'0') {
            Ok(0)
        } else {
            Err(ParseError)
        };
    }
    if !all_digits(s) {
        return Err(ParseError);
    }
    s.parse().map_err(|_| ParseError)
}

/// Calls `f` for every CPU in a cpuset list such as `0-3,5,7-9`, in the order listed.
///
/// `""` (after trimming surrounding whitespace) is the empty set. Elements are separated by commas
/// and are `N` or `LOW-HIGH` with `LOW <= HIGH`; each number parses as in [`parse_uint`] but
/// untrimmed, as in go-zero's `parseUints`. `3-1`, `1-bar`, `bar-3`, `1,,2` and `1,` are errors.
/// The whole list is validated before `f` is first called, so on error `f` is never called.
/// Unlike go-zero, repeated CPUs are not removed (the kernel never writes any). Does not allocate.
pub(crate) fn for_each_cpu(list: &str, mut f: impl FnMut(u32)) -> Result<(), ParseError> {
    for_each_range(list, |_, _| {})?;
    for_each_range(list, |low, high| (low..=high).for_each(&mut f))
}

/// The number of CPUs in a cpuset list (see [`for_each_cpu`]).
pub(super) fn count_cpus(list: &str) -> Result<u64, ParseError> {
    let mut count = 0u64;
    for_each_cpu(list, |_| count += 1)?;
    Ok(count)
}

/// Calls `f(low, high)` for every element of a cpuset list (`N` is `N-N`), stopping at the first
/// invalid element.
fn for_each_range(list: &str, mut f: impl FnMut(u32, u32)) -> Result<(), ParseError> {
    let list = list.trim();
    if list.is_empty() {
        return Ok(());
    }
    let cpu = |s: &str| u32::try_from(parse_uint_exact(s)?).map_err(|_| ParseError);
    for element in list.split(',') {
        let (low, high) = match element.split_once('-') {
            Some((low, high)) => (cpu(low)?, cpu(high)?),
            None => {
                let n = cpu(element)?;
                (n, n)
            }
        };
        if high < low {
            return Err(ParseError);
        }
        f(low, high);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(list: &str) -> Result<Vec<u32>, ParseError> {
        let mut out = Vec::new();
        for_each_cpu(list, |c| out.push(c)).map(|()| out)
    }

    /// Test vector 22 (go-zero `cgroup_linux_test.go`).
    #[test]
    fn vector_22_parsers() {
        assert_eq!(parse_uint("0"), Ok(0));
        assert_eq!(parse_uint("123"), Ok(123));
        assert_eq!(parse_uint("-1"), Ok(0));
        assert_eq!(parse_uint("-18446744073709551616"), Ok(0));
        assert_eq!(parse_uint("foo"), Err(ParseError));

        assert_eq!(cpus(""), Ok(vec![]));
        assert_eq!(cpus("1,2,3"), Ok(vec![1, 2, 3]));
        assert_eq!(cpus("1-3"), Ok(vec![1, 2, 3]));
        assert_eq!(cpus("1-3,5,7-9"), Ok(vec![1, 2, 3, 5, 7, 8, 9]));
        assert_eq!(cpus("3-1"), Err(ParseError));
        assert_eq!(cpus("1-bar"), Err(ParseError));
        assert_eq!(cpus("bar-3"), Err(ParseError));
    }

    #[test]
    fn parser_edges() {
        assert_eq!(parse_uint(" 42\n"), Ok(42));
        assert_eq!(parse_uint("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_uint("18446744073709551616"), Err(ParseError));
        assert_eq!(parse_uint("-99999999999999999999999"), Ok(0));
        assert_eq!(parse_uint("+5"), Err(ParseError));
        assert_eq!(parse_uint("-0"), Err(ParseError));
        assert_eq!(parse_uint("-"), Err(ParseError));
        assert_eq!(parse_uint(""), Err(ParseError));
        assert_eq!(parse_uint("1_000"), Err(ParseError));
        assert_eq!(parse_uint("max"), Err(ParseError));

        assert_eq!(cpus("0-3\n"), Ok(vec![0, 1, 2, 3]));
        assert_eq!(cpus("\n"), Ok(vec![]));
        assert_eq!(cpus("7"), Ok(vec![7]));
        assert_eq!(cpus("2-2"), Ok(vec![2]));
        assert_eq!(cpus("1,,2"), Err(ParseError));
        assert_eq!(cpus("1,"), Err(ParseError));
        assert_eq!(cpus("1, 2"), Err(ParseError));
        assert_eq!(cpus("-1"), Err(ParseError));
        assert_eq!(cpus("4294967296"), Err(ParseError));
        // Validation precedes the calls.
        let mut called = false;
        assert_eq!(for_each_cpu("0-3,x", |_| called = true), Err(ParseError));
        assert!(!called);
        assert_eq!(count_cpus("0-3,8-11,16"), Ok(9));
    }
}

//! Kubernetes resource quantities (`100m`, `0.5`, `128Mi`, `1e3`) as the API
//! server reads them (apimachinery's `resource.Quantity` grammar): enough to
//! refuse a value that is none, and to tell that two spellings are the same
//! amount ("0.5" comes back from the API server as "500m").

/// A quantity's exact value: `sign × digits × 10^exp10`, `digits` without
/// trailing zeros (zero is `0 × 10^0`, unsigned), so equal amounts are equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    negative: bool,
    digits: u128,
    exp10: i32,
}

impl Quantity {
    /// `<sign><number><suffix>`: a decimal number (`1`, `1.5`, `.5`, `5.`)
    /// and a binary (`Ki` … `Ei`), decimal (`n`, `u`, `m`, `k`, `M` … `E`) or
    /// exponent (`e3`, `E-2`) suffix. None: not a quantity, or too large to
    /// hold exactly.
    pub fn parse(s: &str) -> Option<Quantity> {
        let (negative, rest) = match s.as_bytes().first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let number_len = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return None;
        }
        let mut digits: u128 = 0;
        for d in whole.bytes().chain(fraction.bytes()) {
            digits = digits.checked_mul(10)?.checked_add(u128::from(d - b'0'))?;
        }
        let (pow10, pow2) = suffix_power(suffix)?;
        let exp10 = pow10.checked_sub(i32::try_from(fraction.len()).ok()?)?;
        let digits = digits.checked_mul(1u128.checked_shl(pow2)?)?;
        Some(Quantity { negative, digits, exp10 }.normalized())
    }

    fn normalized(mut self) -> Quantity {
        if self.digits == 0 {
            return Quantity { negative: false, digits: 0, exp10: 0 };
        }
        while self.digits.is_multiple_of(10) {
            self.digits /= 10;
            self.exp10 += 1;
        }
        self
    }
}

/// The powers of ten and of two a suffix multiplies by.
fn suffix_power(suffix: &str) -> Option<(i32, u32)> {
    let decimal = |p: i32| Some((p, 0));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => Some((0, 10)),
        "Mi" => Some((0, 20)),
        "Gi" => Some((0, 30)),
        "Ti" => Some((0, 40)),
        "Pi" => Some((0, 50)),
        "Ei" => Some((0, 60)),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            decimal(exponent.parse().ok()?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_as_the_api_server_reads_them() {
        for s in [
            "100m", "0.5", "128Mi", "1Gi", "1e3", "1E3", "1k", "2", ".5", "5.", "+1", "-1", "1.5Gi", "1E", "12n", "3u", "0", "1e-3", "7E+2",
        ] {
            assert!(Quantity::parse(s).is_some(), "{s:?} is a quantity");
        }
        for s in ["lots", "", "1.2.3", "1KB", "Mi", "1e", "1ee3", "--1", "1 Mi", ".", "1.5.Gi", "1e1.5", "1Ki2", "0x10", "1e+"] {
            assert_eq!(Quantity::parse(s), None, "{s:?} is no quantity");
        }
    }

    #[test]
    fn spellings_of_one_amount_are_equal_and_others_are_not() {
        let q = |s: &str| Quantity::parse(s).unwrap();
        for (a, b) in [
            ("0.5", "500m"),
            ("1Gi", "1024Mi"),
            ("1k", "1000"),
            ("1e3", "1k"),
            ("1000m", "1"),
            ("0", "0m"),
            ("-0", "0"),
            ("1.5Gi", "1536Mi"),
            ("0.1", "100m"),
            ("1E", "1000P"),
            ("2Ki", "2048"),
        ] {
            assert_eq!(q(a), q(b), "{a} and {b}");
        }
        for (a, b) in [("128Mi", "128M"), ("1", "-1"), ("100m", "0.01"), ("1Ki", "1k")] {
            assert_ne!(q(a), q(b), "{a} and {b}");
        }
    }
}

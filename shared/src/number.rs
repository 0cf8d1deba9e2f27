//! DynamoDB numbers, read by value: at most 38 significant digits and a
//! magnitude from 1e-130 up to (not including) 1e126, or zero. Numbers are
//! read by value, not by spelling (`0e2147483648` is zero), and [`Decimal`]
//! writes each in one canonical spelling that DynamoDB parses, whatever
//! exponent the request wrote. Shared by the `parameters` rule and storage,
//! so neither imports the other.

use std::cmp::Ordering;
use std::fmt::Write as _;

/// Most significant digits in a DynamoDB number.
pub const MAX_NUMBER_DIGITS: usize = 38;
/// Smallest scientific exponent of a non-zero DynamoDB number (1e-130).
pub const MIN_NUMBER_EXPONENT: i64 = -130;
/// Largest scientific exponent of a DynamoDB number (9.99…e125).
pub const MAX_NUMBER_EXPONENT: i64 = 125;

/// A JSON number read by value: its sign, its significant digits (no
/// leading or trailing zeros) and its scientific exponent, so `1.50e3` and
/// `1500` are equal and zero has no digits whatever its spelling. Borrows
/// the text it was read from.
#[derive(Debug, Clone, Copy)]
pub struct Decimal<'a> {
    negative: bool,
    integer: &'a str,
    fraction: &'a str,
    /// Leading zeros to skip in `integer` followed by `fraction`.
    skip: usize,
    /// Significant digits after those.
    len: usize,
    /// value = ±d.ddd × 10^exponent (saturated for absurd exponents).
    exponent: i64,
}

impl<'a> Decimal<'a> {
    /// Reads a JSON number's text; `None` if it is not one.
    pub fn parse(text: &'a str) -> Option<Self> {
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
        let (integer, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
        if integer.is_empty() || !all_digits(integer) || !all_digits(fraction) {
            return None;
        }
        let exponent_digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        if exponent_digits.is_empty() || !all_digits(exponent_digits) {
            return None;
        }
        let digits = || integer.bytes().chain(fraction.bytes());
        let total = integer.len() + fraction.len();
        let skip = digits().take_while(|&b| b == b'0').count();
        if skip == total {
            return Some(Self {
                negative: false,
                integer,
                fraction,
                skip,
                len: 0,
                exponent: 0,
            });
        }
        let trailing = digits().rev().take_while(|&b| b == b'0').count();
        // An exponent too long for i64 saturates: far outside any range anyway.
        let written = exponent.parse::<i64>().unwrap_or(if exponent.starts_with('-') {
            i64::MIN
        } else {
            i64::MAX
        });
        let whole = i64::try_from(integer.len()).unwrap_or(i64::MAX);
        let skipped = i64::try_from(skip).unwrap_or(i64::MAX);
        Some(Self {
            negative,
            integer,
            fraction,
            skip,
            len: total - skip - trailing,
            exponent: written.saturating_add(whole - skipped - 1),
        })
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.len == 0
    }

    /// Whether the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative && !self.is_zero()
    }

    /// Compares absolute values: digits are trimmed of zeros at both ends,
    /// so the scientific exponent decides, then the digits in order.
    fn cmp_magnitude(&self, other: &Self) -> Ordering {
        match (self.is_zero(), other.is_zero()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => self
                .exponent
                .cmp(&other.exponent)
                .then_with(|| self.digits().cmp(other.digits())),
        }
    }

    /// Whether DynamoDB can store the value as a number (N).
    pub fn fits_dynamodb(&self) -> bool {
        self.is_zero()
            || (self.len <= MAX_NUMBER_DIGITS
                && (MIN_NUMBER_EXPONENT..=MAX_NUMBER_EXPONENT).contains(&self.exponent))
    }

    fn digits(&self) -> impl Iterator<Item = char> + '_ {
        self.integer
            .chars()
            .chain(self.fraction.chars())
            .skip(self.skip)
            .take(self.len)
    }

    /// The one spelling this value is stored in: `0` for zero; plain
    /// decimal digits for magnitudes from 1e-6 to below 1e38 (`1500`,
    /// `0.0012`), scientific notation beyond (`1.5E+40`, `-2E-9`). Meant
    /// for values that [`Decimal::fits_dynamodb`]; the text stays short.
    pub fn canonical(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let mut text = String::with_capacity(self.len + 8);
        if self.negative {
            text.push('-');
        }
        let exponent = self.exponent;
        if (0..MAX_NUMBER_DIGITS as i64).contains(&exponent) {
            let whole = usize::try_from(exponent).unwrap_or(0) + 1;
            text.extend(self.digits().take(whole));
            text.extend(std::iter::repeat_n('0', whole.saturating_sub(self.len)));
            if self.len > whole {
                text.push('.');
                text.extend(self.digits().skip(whole));
            }
        } else if (-6..0).contains(&exponent) {
            text.push_str("0.");
            text.extend(std::iter::repeat_n(
                '0',
                usize::try_from(-exponent - 1).unwrap_or(0),
            ));
            text.extend(self.digits());
        } else {
            let mut digits = self.digits();
            text.extend(digits.next());
            if self.len > 1 {
                text.push('.');
                text.extend(digits);
            }
            // Writing to a String cannot fail.
            let _ = write!(
                text,
                "E{}{}",
                if exponent > 0 { "+" } else { "-" },
                exponent.unsigned_abs()
            );
        }
        text
    }
}

impl PartialEq for Decimal<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Decimal<'_> {}

impl PartialOrd for Decimal<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decimal<'_> {
    /// Numeric order, whatever the spelling.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.is_negative(), other.is_negative()) {
            (false, false) => self.cmp_magnitude(other),
            (true, true) => other.cmp_magnitude(self),
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
        }
    }
}

//! RSA key pairs for GCE service-account keys: two random 1024-bit primes (Miller-Rabin),
//! `e` = 65537, written as PKCS#8 DER and checked by loading them into ring (which validates
//! every component). ring and rcgen (on ring) sign with RSA keys but do not make them; Google
//! makes 2048-bit keys for `keys.create`, as this does. Only for a test cloud: the primes come
//! from ring's system random generator, with no side-channel hardening.

use num_bigint::BigUint;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{KeyPair as _, RsaKeyPair};

/// The modulus size Google's `KEY_ALG_RSA_2048` keys have.
const MODULUS_BITS: u64 = 2048;
const PUBLIC_EXPONENT: u32 = 65_537;
/// Miller-Rabin bases: for random candidates, a wrong answer after these is vanishingly rare.
const BASES: [u32; 16] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53];

/// A new key pair.
pub(crate) struct RsaKey {
    /// PKCS#8 `PrivateKeyInfo`, DER.
    pub pkcs8: Vec<u8>,
    /// PKCS#1 `RSAPublicKey`, DER (what ring verifies with).
    pub public_key: Vec<u8>,
}

impl RsaKey {
    /// The private key as a PEM `PRIVATE KEY` block (what key files hold).
    pub fn pem(&self) -> String {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(&self.pkcs8);
        let mut out = String::from("-----BEGIN PRIVATE KEY-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END PRIVATE KEY-----\n");
        out
    }
}

fn random(rng: &SystemRandom, bytes: usize) -> Result<BigUint, String> {
    let mut buf = vec![0u8; bytes];
    rng.fill(&mut buf)
        .map_err(|_| "the system random generator failed".to_owned())?;
    Ok(BigUint::from_bytes_be(&buf))
}

fn small_primes() -> Vec<u32> {
    (3u32..2000)
        .step_by(2)
        .filter(|n| {
            (3..*n)
                .step_by(2)
                .take_while(|d| d * d <= *n)
                .all(|d| n % d != 0)
        })
        .collect()
}

fn is_probable_prime(n: &BigUint, small: &[u32]) -> bool {
    if small.iter().any(|p| (n % *p) == BigUint::from(0u32)) {
        return false;
    }
    let one = BigUint::from(1u32);
    let n_1 = n - &one;
    let s = n_1.trailing_zeros().unwrap_or(0);
    let d = &n_1 >> s;
    'bases: for a in BASES {
        let mut x = BigUint::from(a).modpow(&d, n);
        if x == one || x == n_1 {
            continue;
        }
        for _ in 1..s {
            x = x.modpow(&BigUint::from(2u32), n);
            if x == n_1 {
                continue 'bases;
            }
        }
        return false;
    }
    true
}

/// A random prime of `bits` bits (the top two set, so two of them make a full-size
/// modulus) with `p - 1` prime to `e`.
fn prime(rng: &SystemRandom, bits: u64, small: &[u32]) -> Result<BigUint, String> {
    let e = BigUint::from(PUBLIC_EXPONENT);
    let top = (BigUint::from(3u32)) << (bits - 2);
    loop {
        let mut p =
            random(rng, usize::try_from(bits / 8).unwrap_or(128))? | &top | BigUint::from(1u32);
        // Walk up from the random start: cheaper than a new random number each time.
        for _ in 0..2000 {
            if p.bits() != bits {
                break;
            }
            if (&p - 1u32) % &e != BigUint::from(0u32) && is_probable_prime(&p, small) {
                return Ok(p);
            }
            p += 2u32;
        }
    }
}

fn der_len(len: usize) -> Vec<u8> {
    if len < 0x80 {
        return vec![u8::try_from(len).unwrap_or(0)];
    }
    let bytes: Vec<u8> = len
        .to_be_bytes()
        .iter()
        .copied()
        .skip_while(|b| *b == 0)
        .collect();
    let mut out = vec![0x80 | u8::try_from(bytes.len()).unwrap_or(0)];
    out.extend(bytes);
    out
}

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend(der_len(content.len()));
    out.extend_from_slice(content);
    out
}

fn der_uint(x: &BigUint) -> Vec<u8> {
    let mut bytes = x.to_bytes_be();
    if bytes.first().is_some_and(|b| b & 0x80 != 0) {
        bytes.insert(0, 0);
    }
    tlv(0x02, &bytes)
}

/// `rsaEncryption` (1.2.840.113549.1.1.1).
const RSA_ENCRYPTION_OID: [u8; 9] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// Makes a 2048-bit key pair.
pub(crate) fn generate() -> Result<RsaKey, String> {
    let rng = SystemRandom::new();
    let small = small_primes();
    let e = BigUint::from(PUBLIC_EXPONENT);
    let one = BigUint::from(1u32);
    loop {
        let a = prime(&rng, MODULUS_BITS / 2, &small)?;
        let b = prime(&rng, MODULUS_BITS / 2, &small)?;
        if a == b {
            continue;
        }
        let (p, q) = if a > b { (a, b) } else { (b, a) };
        let n = &p * &q;
        if n.bits() != MODULUS_BITS {
            continue;
        }
        let phi = (&p - &one) * (&q - &one);
        let (Some(d), Some(qinv)) = (e.modinv(&phi), q.modinv(&p)) else {
            continue;
        };
        let dp = &d % (&p - &one);
        let dq = &d % (&q - &one);
        let fields: Vec<u8> = [
            der_uint(&BigUint::from(0u32)),
            der_uint(&n),
            der_uint(&e),
            der_uint(&d),
            der_uint(&p),
            der_uint(&q),
            der_uint(&dp),
            der_uint(&dq),
            der_uint(&qinv),
        ]
        .concat();
        let rsa_private_key = tlv(0x30, &fields);
        let algorithm = tlv(
            0x30,
            &[tlv(0x06, &RSA_ENCRYPTION_OID), vec![0x05, 0x00]].concat(),
        );
        let pkcs8 = tlv(
            0x30,
            &[tlv(0x02, &[0]), algorithm, tlv(0x04, &rsa_private_key)].concat(),
        );
        let pair = RsaKeyPair::from_pkcs8(&pkcs8)
            .map_err(|e| format!("the new RSA key does not load: {e}"))?;
        return Ok(RsaKey {
            public_key: pair.public_key().as_ref().to_vec(),
            pkcs8,
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256, RSA_PKCS1_SHA256};

    #[test]
    fn a_new_key_signs_and_its_public_key_verifies() {
        let key = generate().unwrap();
        let pair = RsaKeyPair::from_pkcs8(&key.pkcs8).unwrap();
        assert_eq!(pair.public().modulus_len(), 256);
        let mut sig = vec![0; 256];
        pair.sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), b"hello", &mut sig)
            .unwrap();
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &key.public_key)
            .verify(b"hello", &sig)
            .unwrap();
        assert!(key.pem().starts_with("-----BEGIN PRIVATE KEY-----\nMII"));
    }

    #[test]
    fn der_lengths() {
        assert_eq!(der_len(5), [5]);
        assert_eq!(der_len(0x80), [0x81, 0x80]);
        assert_eq!(der_len(0x1234), [0x82, 0x12, 0x34]);
    }
}

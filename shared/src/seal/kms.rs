//! The KMS sealer: `Encrypt`, `GenerateDataKey` and `Decrypt` (of data
//! keys) under the secrets key, with this service's retry policy and time
//! budget.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use aws_sdk_kms::Client;
use aws_sdk_kms::config::http::HttpResponse;
use aws_sdk_kms::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use zeroize::Zeroizing;

use super::values::DataKey;
use super::{EncryptionContext, SealError};
use crate::budget::{self, CallFailure, TIME_BUDGET};

/// KMS's own error codes that mean "try again later" and that the SDK does
/// not classify (throttling, `LimitExceededException` and 5xx answers it
/// does: [`budget::failure`]); every other code is a refusal that retrying
/// will not change.
const TRANSIENT_CODES: [&str; 3] = [
    "KMSInternalException",
    "DependencyTimeoutException",
    "KeyUnavailableException",
];

/// Seals values with KMS `Encrypt` under one key.
#[derive(Clone)]
pub struct KmsSealer {
    client: Client,
    key_id: String,
    /// The calls, reached through pointers that only [`KmsSealer::new`]
    /// names: a function that never builds a KMS sealer (its record kind
    /// seals nothing) then has no KMS operation in its binary, though its
    /// futures could reach these methods (a future's states are data, kept
    /// whatever constant guards them).
    calls: &'static Calls,
}

impl std::fmt::Debug for KmsSealer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("KmsSealer")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

/// A call's answer, boxed behind its pointer.
type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T, SealError>> + Send + 'a>>;

type Encrypt = for<'a> fn(&'a KmsSealer, EncryptionContext<'a>, &'a [u8], Duration) -> Call<'a, Vec<u8>>;
type GenerateDataKey = for<'a> fn(&'a KmsSealer, EncryptionContext<'a>, Duration) -> Call<'a, DataKey>;
type Decrypt =
    for<'a> fn(&'a KmsSealer, &'a [u8], EncryptionContext<'a>, Duration) -> Call<'a, Zeroizing<Vec<u8>>>;
type DescribeKey = for<'a> fn(&'a KmsSealer, Duration) -> Call<'a, ()>;

/// The KMS calls, as pointers ([`KmsSealer::calls`]).
struct Calls {
    seal: Encrypt,
    new_data_key: GenerateDataKey,
    open: Decrypt,
    warm_up: DescribeKey,
}

static CALLS: Calls = Calls {
    seal: |sealer, context, plaintext, budget| Box::pin(sealer.encrypt(context, plaintext, budget)),
    new_data_key: |sealer, context, budget| Box::pin(sealer.generate_data_key(context, budget)),
    open: |sealer, sealed, context, budget| Box::pin(sealer.decrypt(sealed, context, budget)),
    warm_up: |sealer, budget| Box::pin(sealer.describe_key(budget)),
};

impl KmsSealer {
    /// A sealer for `key_id` on a client built from the SDK's shared
    /// configuration (region, credentials, HTTP client,
    /// `AWS_ENDPOINT_URL_KMS`), with this service's budget.
    pub fn from_config(config: &aws_config::SdkConfig, key_id: String) -> Self {
        let config = aws_sdk_kms::config::Builder::from(config)
            .retry_config(budget::retry_config())
            .timeout_config(budget::timeout_config(TIME_BUDGET))
            .build();
        Self::new(Client::from_conf(config), key_id)
    }

    /// Wraps a client built elsewhere.
    pub fn new(client: Client, key_id: String) -> Self {
        Self {
            client,
            key_id,
            calls: &CALLS,
        }
    }

    /// The key values are sealed under.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// Encrypts `plaintext` under `context`.
    pub async fn seal(
        &self,
        context: EncryptionContext<'_>,
        plaintext: &[u8],
        budget: Duration,
    ) -> Result<Vec<u8>, SealError> {
        (self.calls.seal)(self, context, plaintext, budget).await
    }

    /// A new AES-256 data key bound to `context` (`GenerateDataKey`).
    pub async fn new_data_key(
        &self,
        context: EncryptionContext<'_>,
        budget: Duration,
    ) -> Result<DataKey, SealError> {
        (self.calls.new_data_key)(self, context, budget).await
    }

    /// Opens a data key KMS sealed under `context` (`Decrypt`, naming the
    /// secrets key so a blob sealed under any other key is refused).
    pub async fn open_data_key(
        &self,
        sealed: &[u8],
        context: EncryptionContext<'_>,
        budget: Duration,
    ) -> Result<DataKey, SealError> {
        let plaintext = self.open(sealed, context, budget).await?;
        DataKey::new(plaintext, sealed.to_vec())
            .map_err(|error| SealError::Refused(format!("Decrypt: {error}")))
    }

    /// The plaintext KMS sealed under `context` (`Decrypt`, naming the
    /// secrets key).
    pub async fn open(
        &self,
        sealed: &[u8],
        context: EncryptionContext<'_>,
        budget: Duration,
    ) -> Result<Zeroizing<Vec<u8>>, SealError> {
        (self.calls.open)(self, sealed, context, budget).await
    }

    /// Opens the client's connection to KMS with one `DescribeKey` of the
    /// secrets key (metadata only), within `budget`: what init does under
    /// Lambda, so the first sealing request finds a warm connection.
    pub async fn warm_up(&self, budget: Duration) -> Result<(), SealError> {
        (self.calls.warm_up)(self, budget).await
    }

    async fn encrypt(
        &self,
        context: EncryptionContext<'_>,
        plaintext: &[u8],
        budget: Duration,
    ) -> Result<Vec<u8>, SealError> {
        let output = self
            .client
            .encrypt()
            .key_id(&self.key_id)
            .plaintext(Blob::new(plaintext))
            .set_encryption_context(Some(owned(context)))
            .customize()
            .config_override(within(budget)?)
            .send()
            .await
            .map_err(classify)?;
        output
            .ciphertext_blob
            .map(Blob::into_inner)
            .ok_or_else(|| SealError::Refused("Encrypt returned no ciphertext".into()))
    }

    async fn generate_data_key(
        &self,
        context: EncryptionContext<'_>,
        budget: Duration,
    ) -> Result<DataKey, SealError> {
        let output = self
            .client
            .generate_data_key()
            .key_id(&self.key_id)
            .key_spec(DataKeySpec::Aes256)
            .set_encryption_context(Some(owned(context)))
            .customize()
            .config_override(within(budget)?)
            .send()
            .await
            .map_err(classify)?;
        let plaintext = output.plaintext.map(|key| Zeroizing::new(key.into_inner()));
        match (plaintext, output.ciphertext_blob) {
            (Some(plaintext), Some(sealed)) => DataKey::new(plaintext, sealed.into_inner())
                .map_err(|error| SealError::Refused(format!("GenerateDataKey: {error}"))),
            _ => Err(SealError::Refused("GenerateDataKey returned no key".into())),
        }
    }

    async fn decrypt(
        &self,
        sealed: &[u8],
        context: EncryptionContext<'_>,
        budget: Duration,
    ) -> Result<Zeroizing<Vec<u8>>, SealError> {
        let output = self
            .client
            .decrypt()
            .key_id(&self.key_id)
            .ciphertext_blob(Blob::new(sealed))
            .set_encryption_context(Some(owned(context)))
            .customize()
            .config_override(within(budget)?)
            .send()
            .await
            .map_err(classify)?;
        output
            .plaintext
            .map(|key| Zeroizing::new(key.into_inner()))
            .ok_or_else(|| SealError::Refused("Decrypt returned no plaintext".into()))
    }

    async fn describe_key(&self, budget: Duration) -> Result<(), SealError> {
        let call = self.client.describe_key().key_id(&self.key_id).send();
        match tokio::time::timeout(budget, call).await {
            Err(_) => Err(SealError::Unavailable(
                "no answer within the warm-up budget".into(),
            )),
            Ok(result) => result.map(|_| ()).map_err(classify),
        }
    }
}

/// An encryption context as the SDK takes it.
fn owned(context: EncryptionContext<'_>) -> std::collections::HashMap<String, String> {
    context
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

/// A call's configuration for what is left of its budget; none left is
/// unavailable at once, without a call.
fn within(budget: Duration) -> Result<aws_sdk_kms::config::Builder, SealError> {
    if budget.is_zero() {
        return Err(SealError::Unavailable("time budget exhausted".into()));
    }
    Ok(aws_sdk_kms::config::Builder::new().timeout_config(budget::timeout_config(budget)))
}

/// Maps an SDK failure to what the caller can do about it.
fn classify<E: ProvideErrorMetadata + aws_smithy_types::retry::ProvideErrorKind>(
    error: SdkError<E, HttpResponse>,
) -> SealError {
    match budget::failure(&error, |error| budget::has_code(error, &TRANSIENT_CODES)) {
        CallFailure::Unavailable(reason) => SealError::Unavailable(reason),
        CallFailure::Refused(reason) => SealError::Refused(reason),
    }
}

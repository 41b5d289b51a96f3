use crate::error::{Error, Result};
use crate::media_stream::track_local::TrackLocal;
use crate::peer_connection::PeerConnectionRef;
use crate::peer_connection::transport::{DtlsRoute, DtlsTransport, DtlsTransportImpl};
use crate::rtp_transceiver::RtpSender;
use rtc::media_stream::MediaStreamId;
use rtc::rtp_transceiver::RTCRtpSenderId;
use rtc::rtp_transceiver::rtp_sender::{
    RTCRtpCapabilities, RTCRtpSendParameters, RTCSetParameterOptions, RtpCodecKind,
};
use rtc::statistics::StatsSelector;
use rtc::statistics::report::RTCStatsReport;
use std::sync::{Arc, Weak};
use std::time::Instant;

/// Concrete async rtp sender implementation (generic over interceptor type).
///
/// This wraps a rtp sender and provides async send/receive APIs.
pub(crate) struct RtpSenderImpl {
    /// Unique identifier for this rtp sender
    id: RTCRtpSenderId,

    /// Inner PeerConnection Reference
    inner: Weak<PeerConnectionRef>,

    track: Arc<dyn TrackLocal>,
}

impl RtpSenderImpl {
    /// The owning connection, or `ErrConnectionClosed` once it is gone. The back-reference is
    /// `Weak` because `PeerConnectionRef` owns this object: a strong one would form a cycle that
    /// keeps the whole connection alive after `close()` and drop (webrtc#906).
    fn peer_connection(&self) -> Result<Arc<PeerConnectionRef>> {
        self.inner.upgrade().ok_or(Error::ErrConnectionClosed)
    }

    /// Create a new rtp sender wrapper
    pub(crate) fn new(
        id: RTCRtpSenderId,
        inner: Arc<PeerConnectionRef>,
        track: Arc<dyn TrackLocal>,
    ) -> Self {
        Self {
            id,
            inner: Arc::downgrade(&inner),
            track,
        }
    }
}

impl crate::sealed::Sealed for RtpSenderImpl {}

#[async_trait::async_trait]
impl RtpSender for RtpSenderImpl {
    fn id(&self) -> RTCRtpSenderId {
        self.id
    }

    fn track(&self) -> &Arc<dyn TrackLocal> {
        &self.track
    }

    async fn get_capabilities(&self, kind: RtpCodecKind) -> Result<Option<RTCRtpCapabilities>> {
        let pc = self.peer_connection()?;
        let mut peer_connection = pc.core.lock().await;

        Ok(peer_connection
            .rtp_sender(self.id)
            .ok_or(Error::ErrRTPSenderNotExisted)?
            .get_capabilities(kind))
    }

    async fn set_parameters(
        &self,
        parameters: RTCRtpSendParameters,
        set_parameter_options: Option<RTCSetParameterOptions>,
    ) -> Result<()> {
        let pc = self.peer_connection()?;
        let mut peer_connection = pc.core.lock().await;

        peer_connection
            .rtp_sender(self.id)
            .ok_or(Error::ErrRTPSenderNotExisted)?
            .set_parameters(parameters, set_parameter_options)
    }

    async fn get_parameters(&self) -> Result<RTCRtpSendParameters> {
        let pc = self.peer_connection()?;
        let mut peer_connection = pc.core.lock().await;

        Ok(peer_connection
            .rtp_sender(self.id)
            .ok_or(Error::ErrRTPSenderNotExisted)?
            .get_parameters()
            .to_owned())
    }

    async fn replace_track(&self, track: Arc<dyn TrackLocal>) -> Result<()> {
        let pc = self.peer_connection()?;
        let mut peer_connection = pc.core.lock().await;

        peer_connection
            .rtp_sender(self.id)
            .ok_or(Error::ErrRTPSenderNotExisted)?
            .replace_track(track.track().await)
    }

    async fn set_streams(&self, streams: Vec<MediaStreamId>) -> Result<()> {
        let pc = self.peer_connection()?;
        let mut peer_connection = pc.core.lock().await;

        peer_connection
            .rtp_sender(self.id)
            .ok_or(Error::ErrRTPSenderNotExisted)?
            .set_streams(streams);
        Ok(())
    }

    async fn get_stats(&self, now: Instant) -> Result<RTCStatsReport> {
        let pc = self.peer_connection()?;
        let mut peer_connection = pc.core.lock().await;
        peer_connection
            .rtp_sender(self.id)
            .ok_or(Error::ErrRTPSenderNotExisted)?;
        Ok(peer_connection.get_stats(now, StatsSelector::Sender(self.id)))
    }
    async fn transport(&self) -> Result<Option<Arc<dyn DtlsTransport>>> {
        let pc = self.peer_connection()?;
        let mut peer_connection = pc.core.lock().await;

        // Walk under the lock and keep only the ids: a borrowed view cannot cross an await, so
        // the handle re-walks per call and carries the ids so `id()` can stay synchronous.
        let ids = match peer_connection.rtp_sender(self.id) {
            Some(sender) => sender
                .transport()
                .map(|dtls| (dtls.id(), dtls.ice_transport().id())),
            None => return Err(Error::ErrRTPSenderNotExisted),
        };
        drop(peer_connection);

        Ok(ids.map(|(id, ice_id)| {
            Arc::new(DtlsTransportImpl::new(
                id,
                ice_id,
                DtlsRoute::Sender(self.id),
                Arc::clone(&pc),
            )) as Arc<dyn DtlsTransport>
        }))
    }
}

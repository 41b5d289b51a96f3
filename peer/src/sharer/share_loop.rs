//! The share loop: the shell that drives core's [`Share`] machine. It hands
//! the machine what happened (relay text, a visitor's news, a control
//! request, a password checked, a task ended, the time) and carries out
//! every output, then waits for the next thing or the machine's deadline.
//!
//! ```text
//!            relay line -----+                     +--> relay line (send, connect, close)
//!   visitor tasks' news -----+                     +--> Visitors (start, candidates, instruct)
//!        control socket -----+--> Share machine ---+--> Views (admit, joined, end)
//!  Argon2 (blocking pool) ---+   poll_output()     +--> Argon2 checks, links.json
//!     tasks that ended ------+                     +--> ShareEvent for the terminal
//!              deadline -----+
//! ```
//!
//! Every decision is the machine's; what is here is IO and bookkeeping that
//! needs the disk or the runtime. Nothing blocks the loop: Argon2 (hashing a
//! new link's password, checking a guess) runs on the blocking pool.

use std::time::Duration;

use linkfs_core::Millis;
use linkfs_core::share::{NewLink, Now, SCOPE_GONE, Share, ShareNews, ShareOutput};
use linkfs_proto::signal::IceServer;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::control::{Answer, ControlRequest, Request};
use super::event::{ShareError, ShareEvent};
use super::host::{RelayIn, RelayLine};
use super::password::{self, HashError};
use super::requests::{self, LinkRefused};
use super::share_state::{ShareState, StateError};
use super::views::Views;
use super::visitors::{Instruction, VisitorLeft, VisitorNews, Visitors};
use crate::lanes::LaneBoard;
use crate::transport::{DataLinkSender, IcePolicy, NativeTuning, TransportConfig};

/// News from visitor tasks queued for the loop.
const NEWS_QUEUE: usize = 256;

/// The time as the machine reads it: a monotonic clock from the start, and
/// the wall clock.
#[derive(Debug, Clone, Copy)]
pub struct ShareClock(Instant);

impl ShareClock {
    pub fn start() -> ShareClock {
        ShareClock(Instant::now())
    }

    pub fn now(&self) -> Now {
        Now {
            mono: Millis(self.0.elapsed().as_millis() as u64),
            unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }

    fn instant(&self, at: Millis) -> Instant {
        self.0 + Duration::from_millis(at.0)
    }
}

/// The transport settings for visitors: the relay's ICE servers added, and the
/// same-host tuning when only this host can reach the relay.
pub fn visitor_transport(
    base: &TransportConfig,
    ice_servers: Vec<IceServer>,
    loopback_only: bool,
) -> TransportConfig {
    let mut transport = base.clone();
    transport.ice_servers.extend(ice_servers);
    if loopback_only && transport.native_peer.is_some() && transport.ice_policy != IcePolicy::Relay
    {
        // Only this host can reach a loopback relay, so a native visitor is on this
        // host too: large SCTP packets are safe (measured 730-915 MB/s against
        // about 300). Browsers never ask for native tuning.
        transport.native_peer = Some(NativeTuning::SAME_HOST);
    }
    transport
}

/// Registers the share's room at the relay: the relay's ICE servers, once it
/// holds the room.
pub async fn register(
    share: &mut Share,
    relay: &mut RelayLine,
    clock: &ShareClock,
) -> Result<Vec<IceServer>, ShareError> {
    loop {
        match share.poll_output() {
            ShareOutput::Relay(text) => relay.send(text).await?,
            ShareOutput::Registered { ice_servers, .. } => return Ok(ice_servers),
            ShareOutput::Failed(why) => return Err(ShareError::Refused(why)),
            ShareOutput::Timeout(_) => match relay.recv().await {
                RelayIn::Text(text) => share.relay_text(clock.now(), &text),
                _ => return Err(ShareError::RelayClosed),
            },
            _ => {}
        }
    }
}

/// What the loop works with. See the module docs.
pub struct ShareLoop {
    pub share: Share,
    pub views: Views,
    pub relay: RelayLine,
    pub state: Option<ShareState>,
    pub events: mpsc::Sender<ShareEvent>,
    pub clock: ShareClock,
    /// `--transport` settings; the relay's ICE servers are added to them.
    pub base_transport: TransportConfig,
    pub loopback_only: bool,
    pub transport: TransportConfig,
    /// Cancels every visitor (the parent of each visitor's own token).
    pub stop_visitors: CancellationToken,
    visitors: Visitors,
    lanes: LaneBoard<DataLinkSender>,
    news_tx: mpsc::Sender<VisitorNews>,
    news_rx: mpsc::Receiver<VisitorNews>,
    /// Password guesses being checked: (job, right).
    checks: JoinSet<(u64, bool)>,
    /// Links asked for whose password is being hashed, and where the answer goes.
    adding: JoinSet<(Result<NewLink, LinkRefused>, oneshot::Sender<Answer>)>,
    deadline: Option<Millis>,
}

/// What a link request is answered with, and whether the terminal hears of it.
struct Reply {
    answer: Answer,
    announce: bool,
}

impl ShareLoop {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        share: Share,
        views: Views,
        relay: RelayLine,
        state: Option<ShareState>,
        events: mpsc::Sender<ShareEvent>,
        clock: ShareClock,
        base_transport: TransportConfig,
        loopback_only: bool,
        ice_servers: Vec<IceServer>,
        stop_visitors: CancellationToken,
    ) -> ShareLoop {
        let (news_tx, news_rx) = mpsc::channel(NEWS_QUEUE);
        let transport = visitor_transport(&base_transport, ice_servers, loopback_only);
        ShareLoop {
            share,
            views,
            relay,
            state,
            events,
            clock,
            base_transport,
            loopback_only,
            transport,
            stop_visitors,
            visitors: Visitors::new(),
            lanes: LaneBoard::new(),
            news_tx,
            news_rx,
            checks: JoinSet::new(),
            adding: JoinSet::new(),
            deadline: None,
        }
    }

    /// Runs until `cancel` fires.
    pub async fn run(
        &mut self,
        cancel: &CancellationToken,
        control: &mut mpsc::Receiver<ControlRequest>,
    ) {
        loop {
            self.drain().await;
            let deadline = self.deadline.map(|at| self.clock.instant(at));
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    self.share.handle_timeout(self.clock.now());
                }
                Some(asked) = control.recv() => self.request(asked).await,
                Some(hashed) = self.adding.join_next(), if !self.adding.is_empty() => {
                    if let Ok((made, reply)) = hashed {
                        self.link_hashed(made, reply).await;
                    }
                }
                Some(news) = self.news_rx.recv() => self.news(news),
                Some(checked) = self.checks.join_next(), if !self.checks.is_empty() => {
                    if let Ok((job, right)) = checked {
                        self.share.password_checked(self.clock.now(), job, right);
                    }
                }
                Some(left) = self.visitors.next_left(), if !self.visitors.is_empty() => {
                    self.left(left).await;
                }
                input = self.relay.recv() => {
                    let now = self.clock.now();
                    match input {
                        RelayIn::Text(text) => self.share.relay_text(now, &text),
                        RelayIn::Closed => self.share.relay_closed(now),
                        RelayIn::Opened => self.share.relay_opened(now),
                        RelayIn::Failed => self.share.relay_failed(now),
                    }
                }
            }
        }
    }

    /// Says goodbye to every visitor, gives them `within` to hear it, closes
    /// the relay line and stops the views: the state, to save the index in.
    pub async fn stop(mut self, within: Duration) -> Option<ShareState> {
        self.stop_visitors.cancel();
        self.visitors.wind_down(within).await;
        self.relay.close().await;
        self.views.stop().await;
        self.state
    }

    /// Carries out the machine's outputs until it says its deadline. A
    /// failure to keep the links is returned (and told) as well.
    async fn drain(&mut self) -> Option<StateError> {
        let mut keep_failed = None;
        loop {
            match self.share.poll_output() {
                ShareOutput::Relay(text) => {
                    if self.relay.send(text).await.is_err() {
                        self.share.relay_closed(self.clock.now());
                    }
                }
                ShareOutput::ConnectRelay => self.relay.reconnect(),
                ShareOutput::CloseRelay => self.relay.close_now().await,
                ShareOutput::Registered { ice_servers, .. }
                | ShareOutput::IceServers(ice_servers) => {
                    // The new connection's servers (fresh TURN credentials).
                    self.transport =
                        visitor_transport(&self.base_transport, ice_servers, self.loopback_only);
                }
                ShareOutput::Failed(why) => {
                    tracing::warn!(%why, "the relay refused the room");
                }
                ShareOutput::Answer { peer, offer, link } => {
                    let record = self.share.links().get(link).cloned();
                    let label = self.share.label_of(link);
                    match self.views.admit(peer, link, record.as_ref(), label) {
                        Ok(ctx) => self.visitors.admit(
                            peer,
                            offer,
                            self.transport.clone(),
                            ctx,
                            self.lanes.clone(),
                            self.news_tx.clone(),
                        ),
                        Err(e) => {
                            // Never the whole share instead: the guest is told, sealed.
                            tracing::info!(peer = peer.0, error = %e, "what a link shows is gone");
                            self.share.cannot_show(peer, SCOPE_GONE.to_owned());
                        }
                    }
                }
                ShareOutput::AddCandidate { peer, candidate } => {
                    self.visitors.add_candidate(peer, candidate);
                }
                ShareOutput::Transmit { peer, frame } => {
                    self.visitors.instruct(peer, Instruction::Transmit(frame));
                }
                ShareOutput::CloseLink { peer } => self.visitors.instruct(peer, Instruction::Close),
                ShareOutput::CheckPassword { job, hash, attempt } => {
                    self.checks.spawn(async move {
                        let right =
                            tokio::task::spawn_blocking(move || password::matches(&hash, &attempt))
                                .await
                                .unwrap_or(false);
                        (job, right)
                    });
                }
                ShareOutput::StartSession { peer, first, .. } => {
                    self.views.joined(peer);
                    self.visitors.instruct(peer, Instruction::Start(first));
                }
                ShareOutput::EndVisitor { peer, code, words } => self.views.end(peer, code, words),
                ShareOutput::KeepLinks => {
                    if let Some(state) = &self.state
                        && let Err(e) = state.keep_links(self.share.links())
                    {
                        self.tell(ShareEvent::Warning(format!(
                            "the links could not be kept for the next run: {e}"
                        )))
                        .await;
                        keep_failed = Some(e);
                    }
                }
                ShareOutput::News(news) => self.told(news).await,
                ShareOutput::Timeout(at) => {
                    self.deadline = at;
                    return keep_failed;
                }
                other => tracing::debug!(?other, "a share output this sharer does not use"),
            }
        }
    }

    async fn told(&self, news: ShareNews) {
        let event = match news {
            ShareNews::VisitorConnected {
                peer,
                visitors,
                who,
            } => ShareEvent::VisitorConnected {
                peer,
                visitors,
                who,
            },
            ShareNews::Links(words) => ShareEvent::Links(words),
            ShareNews::Warning(w) => ShareEvent::Warning(w),
            ShareNews::Refused { peer, why } => {
                tracing::info!(peer = peer.0, %why, "turned a visitor away");
                return;
            }
            other => {
                tracing::debug!(?other, "share news this sharer does not show");
                return;
            }
        };
        self.tell(event).await;
    }

    async fn tell(&self, event: ShareEvent) {
        let _ = self.events.send(event).await;
    }

    fn news(&mut self, news: VisitorNews) {
        let now = self.clock.now();
        match news {
            VisitorNews::Answer(peer, sdp) => self.share.answer_made(peer, sdp),
            VisitorNews::LocalCandidate(peer, c) => self.share.local_candidate(peer, c),
            VisitorNews::Opened(peer, address) => {
                self.share
                    .link_opened(now, peer, password::source_of(address));
            }
            VisitorNews::Lane(peer) => {
                self.views.lane(peer);
                self.share.lane(peer);
            }
            VisitorNews::FirstFrame(peer, frame) => self.share.first_frame(now, peer, frame),
            VisitorNews::Frame(peer, frame) => self.share.frame(now, peer, &frame),
        }
    }

    async fn left(&mut self, left: VisitorLeft) {
        let figures = self.views.left(left.peer, &left.end.to_string());
        let departed = self
            .share
            .visitor_ended(self.clock.now(), left.peer, figures);
        self.tell(ShareEvent::VisitorLeft {
            peer: left.peer,
            visitors: departed.visitors,
            end: left.end,
            who: departed.who,
            served: figures.served,
        })
        .await;
    }

    async fn request(&mut self, asked: ControlRequest) {
        let ControlRequest { request, reply } = asked;
        let now = self.clock.now();
        let answered = match request {
            Request::List => Reply {
                answer: Answer {
                    links: requests::link_views(&self.share, &self.views),
                    ..Answer::done("")
                },
                announce: false,
            },
            Request::Visitors => Reply {
                answer: Answer {
                    visitors: requests::visitor_views(&self.share, &self.views),
                    ..Answer::done("")
                },
                announce: false,
            },
            Request::Add {
                label,
                expires,
                scope,
                selection,
                upload,
                password,
            } => {
                let asked = self
                    .views
                    .rights(scope.as_deref(), &selection)
                    .map_err(LinkRefused::from)
                    .and_then(|shown| {
                        requests::ask(
                            now.unix,
                            label,
                            expires.as_deref(),
                            shown,
                            upload,
                            password,
                            false,
                        )
                    });
                match asked {
                    Ok(asked) => {
                        // Its password is hashed off the loop; the answer follows.
                        self.adding.spawn(async move {
                            let made = tokio::task::spawn_blocking(move || asked.hashed())
                                .await
                                .map_err(|e| LinkRefused::from(HashError::from(e)))
                                .and_then(|made| made);
                            (made, reply)
                        });
                        return;
                    }
                    Err(e) => Reply {
                        answer: Answer::failed(e),
                        announce: false,
                    },
                }
            }
            Request::Revoke { id } => Reply {
                answer: requests::revoke(&mut self.share, now, id),
                announce: true,
            },
            Request::Kick { visitor } => Reply {
                answer: requests::kick(&mut self.share, now, visitor),
                announce: true,
            },
        };
        self.reply(reply, answered).await;
    }

    async fn link_hashed(
        &mut self,
        made: Result<NewLink, LinkRefused>,
        reply: oneshot::Sender<Answer>,
    ) {
        let now = self.clock.now();
        let answer = match made.and_then(|new| requests::make(&mut self.share, now, new)) {
            Ok(record) => requests::made(&self.share, &self.views, &record),
            Err(e) => Answer::failed(e),
        };
        self.reply(
            reply,
            Reply {
                answer,
                announce: true,
            },
        )
        .await;
    }

    /// Carries out what the request changed, then answers it (and tells the
    /// terminal of a change to the links).
    async fn reply(&mut self, reply: oneshot::Sender<Answer>, answered: Reply) {
        let Reply {
            mut answer,
            announce,
        } = answered;
        if let Some(e) = self.drain().await
            && answer.ok
        {
            answer.said = format!(
                "{}; but the links could not be kept for the next run: {e}",
                answer.said
            );
        }
        if announce && answer.ok {
            self.tell(ShareEvent::Links(answer.said.clone())).await;
        }
        let _ = reply.send(answer);
    }
}

import Dispatch
import TimerdCore
import TimerdEngine
import TimerdHTTP
import TimerdSystem

/// Sends webhook requests on one `HTTPSession` (TimerdHTTP): every transfer of the daemon on one curl
/// multi handle (one connection cache, so connections to the same server are reused), its sockets watched
/// by the `IOWatcher` thread and its timeouts by one Dispatch timer, all on the launcher's own queue. No
/// thread per request, and nothing here ever runs on (or blocks) the registry's queue.
///
/// Everything mutable is confined to `queue`.
final class WebhookLauncher: RunLauncher, @unchecked Sendable {
    let queue = DispatchQueue(label: "timerd.http")
    let log: Logger
    /// libcurl is loaded and set up on the first webhook, not at start-up (see CTimerdCurl.h): a daemon
    /// without webhook jobs never pays for it (measured: 18.0 MiB resident when linked and set up at
    /// start, 10.2 MiB without). nil, with `loadError`, when libcurl cannot be loaded.
    private lazy var session: HTTPSession? = makeSession()
    private(set) var loadError = ""

    /// The library to load: `libcurl.so.4`, or a name that does not exist under the test failpoint
    /// `no-libcurl` (docs/webhooks.md).
    private let library: String

    /// Times runs (their end, their duration).
    let clock: any Clock

    init(log: Logger, clock: any Clock, library: String = "libcurl.so.4") {
        self.log = log
        self.clock = clock
        self.library = library
    }

    private func makeSession() -> HTTPSession? {
        do {
            return try HTTPSession(queue: queue, library: library) { [log] trouble in log.error("webhooks: \(trouble)") }
        } catch {
            loadError = error.message
            log.error("webhooks: \(loadError)")
            return nil
        }
    }

    /// Whether libcurl is ready (loading it on first use); false after a failed load.
    var isReady: Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        return session != nil
    }

    func start(_ request: RunRequest, events: @escaping @Sendable (RunEvent) -> Void) -> any RunHandle {
        let run = WebhookRun(request: request, launcher: self, events: events)
        queue.async { run.begin() }
        return run
    }

    // MARK: - Attempts (on `queue`)

    /// Starts one attempt; `done` runs on `queue` when it ends.
    func send(_ exchange: HTTPExchange, done: @escaping (HTTPResponse) -> Void) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let session else { return done(HTTPResponse(status: nil, body: [], failure: HTTPFailure(.setup, loadError))) }
        session.start(exchange, done: done)
    }

    /// Abandons an attempt in flight (its `done` is never called).
    func abandon(_ exchange: HTTPExchange) {
        dispatchPrecondition(condition: .onQueue(queue))
        session?.abandon(exchange)
    }
}

/// One webhook run: its attempts, the waits between them, and its one outcome. Confined to the launcher's
/// queue (hence `@unchecked Sendable`); `stop`/`kill` hop onto it.
final class WebhookRun: RunHandle, @unchecked Sendable {
    private let request: RunRequest
    private let hook: Webhook
    private let launcher: WebhookLauncher
    private let events: @Sendable (RunEvent) -> Void
    private var attempt = 0
    private var current: HTTPExchange?
    private var retryTimer: (any DispatchSourceTimer)?
    private var startedMono = MonoInstant.zero
    private var finished = false

    init(request: RunRequest, launcher: WebhookLauncher, events: @escaping @Sendable (RunEvent) -> Void) {
        guard case .webhook(let hook) = request.action else { preconditionFailure("WebhookRun for a command") }
        self.request = request
        self.hook = hook
        self.launcher = launcher
        self.events = events
    }

    func stop(reason: String) { launcher.queue.async { self.cancel(reason: reason) } }
    func kill(reason: String) { launcher.queue.async { self.cancel(reason: reason) } }

    func begin() {
        startedMono = launcher.clock.monotonicNow
        // Like a command that cannot be spawned: no `started`, only the outcome.
        guard launcher.isReady else { return finish(.failed, status: nil, reason: launcher.loadError, output: []) }
        events(.started(pid: nil))
        send()
    }

    private var timeout: Duration { request.timeout ?? Webhook.defaultTimeout }

    private func send() {
        attempt += 1
        var headers: [String] = []
        let hasContentType = hook.headers.contains { $0.lowercased().hasPrefix("content-type:") }
        if request.webhookBody != nil, !hasContentType {
            headers.append("Content-Type: \(hook.contentType ?? Webhook.defaultContentType)")
        }
        headers += hook.headers
        let attempt = HTTPRequest(
            url: hook.url, method: hook.method, headers: headers, body: request.webhookBody.map { Array($0.utf8) },
            timeout: timeout, redirects: hook.redirects, tls: HTTPTLS(caFile: hook.caFile, verify: !hook.insecure),
            userAgent: "timerd/\(ControlHandler.version)", keep: .last(Limits.outputTailBytes))
        guard let exchange = HTTPExchange(attempt) else {
            return finish(.failed, status: nil, reason: "cannot set up the request (out of memory)", output: [])
        }
        current = exchange
        launcher.send(exchange) { [self] response in self.attemptEnded(response) }
    }

    private func attemptEnded(_ response: HTTPResponse) {
        guard current != nil, !finished else { return }
        current = nil
        let status = response.status
        let (outcome, why) = Self.judge(response, hook: hook, timeout: timeout)
        if outcome == .ok {
            return finish(.ok, status: status, reason: why, output: response.body)
        }
        let retries = attempt - 1
        if attempt <= hook.retries {
            let delay = Self.backoff(hook.retryBackoff, retry: attempt)
            launcher.log.notice(
                job: request.job, run: request.runID,
                "\(hook.method) \(hook.redactedURL): attempt \(attempt) of \(hook.retries + 1): \(why); retrying in \(DurationText.format(.milliseconds(max(1, delay.nanoseconds / 1_000_000))))")
            let timer = DispatchSource.makeTimerSource(queue: launcher.queue)
            timer.schedule(deadline: .now() + .nanoseconds(Int(delay.nanoseconds)))
            timer.setEventHandler { [self] in
                self.retryTimer?.cancel()
                self.retryTimer = nil
                if !self.finished { self.send() }
            }
            retryTimer = timer
            timer.resume()
            return
        }
        let suffix = retries == 0 ? "" : " (retried \(retries) \(retries == 1 ? "time" : "times"))"
        finish(outcome, status: status, reason: why + suffix, output: response.body)
    }

    /// Ok or not, and why, for one attempt.
    static func judge(_ response: HTTPResponse, hook: Webhook, timeout: Duration) -> (RunOutcome.Result, String) {
        guard let failure = response.failure else {
            let status = response.status ?? 0
            if hook.expect.contains(status) { return (.ok, "status \(status)") }
            let redirect = (300...399).contains(status) && hook.redirects == 0 ? " (redirect not followed: redirects=0)" : ""
            return (.failed, "status \(status)\(redirect), expected \(hook.expect)")
        }
        let message = failure.message
        switch failure.kind {
        case .timedOut: return (.timeout, "timed out after \(DurationText.format(timeout))")
        case .resolve: return (.failed, "DNS: \(message)")
        case .connect: return (.failed, "connect: \(message)")
        case .tls: return (.failed, "TLS: \(message)")
        case .tooManyRedirects: return (.failed, "more than \(hook.redirects) redirect\(hook.redirects == 1 ? "" : "s"): \(message)")
        case .setup, .other: return (.failed, message)
        }
    }

    /// Before retry `retry` (1-based): a random time in [d/2, d], d = min(base·2^(retry−1), maximum).
    static func backoff(_ base: Duration, retry: Int) -> Duration {
        RetryPolicy.ceiling(base, retry: retry) * Double.random(in: 0.5...1.0)
    }

    private func cancel(reason: String) {
        guard !finished else { return }
        if let current { launcher.abandon(current) }
        current = nil
        finish(.killed, status: nil, reason: reason, output: [])
    }

    private func finish(_ result: RunOutcome.Result, status: Int?, reason: String, output: [UInt8]) {
        guard !finished else { return }
        finished = true
        retryTimer?.cancel()
        retryTimer = nil
        let now = launcher.clock.now()
        events(.finished(RunOutcome(
            result: result, exitCode: nil, signal: nil, httpStatus: status, reason: reason,
            output: String(decoding: output, as: UTF8.self), finishedWall: now.wall, duration: now.mono - startedMono)))
    }
}

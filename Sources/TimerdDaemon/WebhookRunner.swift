import CTimerdCurl
import Dispatch
import TimerdCore
import TimerdEngine
import TimerdSystem

/// Sends webhook requests with libcurl's multi interface: every transfer of the daemon on one curl multi
/// handle (one connection cache, so connections to the same server are reused), its sockets watched by
/// the `IOWatcher` thread and its timeouts by one Dispatch timer, all on the launcher's own queue. No
/// thread per request, and nothing here ever runs on (or blocks) the registry's queue.
///
/// Everything mutable is confined to `queue`: libcurl calls the socket and timer callbacks only from
/// inside `curl_multi_*` calls, which happen only on `queue`.
final class WebhookLauncher: RunLauncher, @unchecked Sendable {
    let queue = DispatchQueue(label: "timerd.http")
    let log: Logger
    private var sockets: [Int32: IOWatcher.Registration] = [:]
    private var transfers: [UnsafeMutableRawPointer: WebhookTransfer] = [:]
    private let timer: any DispatchSourceTimer
    /// libcurl is loaded and set up on the first webhook, not at start-up (see CTimerdCurl.h): a daemon
    /// without webhook jobs never pays for it (measured: 18.0 MiB resident when linked and set up at
    /// start, 10.2 MiB without). nil, with `loadError`, when libcurl cannot be loaded.
    private lazy var multi: UnsafeMutableRawPointer? = makeMulti()
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
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [unowned self] in self.drive(socket: -1, events: 0) }
        timer.schedule(deadline: .distantFuture)
        timer.resume()
    }

    private func makeMulti() -> UnsafeMutableRawPointer? {
        dispatchPrecondition(condition: .onQueue(queue))
        var error = [CChar](repeating: 0, count: 512)
        guard tcurl_load(library, &error, error.count) == 0 else {
            loadError = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            log.error("webhooks: \(loadError)")
            return nil
        }
        // Process-wide; only this queue ever calls libcurl.
        _ = tcurl_global_init(Int(CURL_GLOBAL_DEFAULT))
        guard let multi = tcurl_multi_init() else {
            loadError = "curl_multi_init failed (out of memory)"
            return nil
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = tcurl_multi_setopt_socket(multi, { _, socket, what, context, _ in
            Unmanaged<WebhookLauncher>.fromOpaque(context!).takeUnretainedValue().socketChanged(socket, what: what)
            return 0
        }, context)
        _ = tcurl_multi_setopt_timer(multi, { _, milliseconds, context in
            Unmanaged<WebhookLauncher>.fromOpaque(context!).takeUnretainedValue().timeoutChanged(milliseconds)
            return 0
        }, context)
        return multi
    }

    /// Whether libcurl is ready (loading it on first use); false after a failed load.
    var isReady: Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        return multi != nil
    }

    func start(_ request: RunRequest, events: @escaping @Sendable (RunEvent) -> Void) -> any RunHandle {
        let run = WebhookRun(request: request, launcher: self, events: events)
        queue.async { run.begin() }
        return run
    }

    // MARK: - Transfers (on `queue`)

    /// Starts one attempt; `done` runs on `queue` when it ends.
    func send(_ transfer: WebhookTransfer) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let multi else { return transfer.finish(result: CURLE_FAILED_INIT, message: loadError) }
        transfers[transfer.easy] = transfer
        let code = tcurl_multi_add_handle(multi, transfer.easy)
        if code != CURLM_OK {
            transfers[transfer.easy] = nil
            transfer.finish(result: CURLE_FAILED_INIT, message: "curl_multi_add_handle: \(String(cString: tcurl_multi_strerror(code)))")
            return
        }
    }

    /// Abandons an attempt in flight (its `done` is never called).
    func abandon(_ transfer: WebhookTransfer) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let multi, transfers.removeValue(forKey: transfer.easy) != nil else { return }
        tcurl_multi_remove_handle(multi, transfer.easy)
        transfer.release()
    }

    // MARK: - libcurl's callbacks and events (on `queue`)

    private func socketChanged(_ socket: Int32, what: Int32) {
        if what == CURL_POLL_REMOVE {
            if let registration = sockets.removeValue(forKey: socket) { IOWatcher.shared.cancel(registration) }
            return
        }
        var interest: IOWatcher.Events = []
        if what == CURL_POLL_IN || what == CURL_POLL_INOUT { interest.insert(.readable) }
        if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { interest.insert(.writable) }
        if let registration = sockets[socket] {
            IOWatcher.shared.update(registration, to: interest)
            return
        }
        do {
            sockets[socket] = try IOWatcher.shared.watch(FileDescriptor(rawValue: socket), for: interest, on: queue) {
                [unowned self] events in
                var mask: Int32 = 0
                if events.contains(.readable) { mask |= CURL_CSELECT_IN }
                if events.contains(.writable) { mask |= CURL_CSELECT_OUT }
                self.drive(socket: socket, events: mask)
            }
        } catch {
            // curl then times the transfer out; say why.
            log.error("webhooks: cannot watch socket \(socket): \(error)")
        }
    }

    private func timeoutChanged(_ milliseconds: Int) {
        if milliseconds < 0 {
            timer.schedule(deadline: .distantFuture)
        } else {
            // Never call curl from inside its own callback: the timer does it, even for 0 ms.
            timer.schedule(deadline: .now() + .milliseconds(milliseconds))
        }
    }

    /// Lets curl act on a ready socket (or on its timeout, for socket -1), then collects finished transfers.
    private func drive(socket: Int32, events: Int32) {
        guard let multi else { return }
        var running: Int32 = 0
        _ = tcurl_multi_socket_action(multi, socket, events, &running)
        var left: Int32 = 0
        while let message = tcurl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let result = tcurl_message_result(message)
            tcurl_multi_remove_handle(multi, easy)
            guard let transfer = transfers.removeValue(forKey: easy) else { continue }
            transfer.finish(result: result, message: nil)
        }
    }
}

/// One attempt: a curl easy handle with what it must keep alive (headers, error buffer, response tail).
final class WebhookTransfer {
    let easy: UnsafeMutableRawPointer
    private var headers: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    private(set) var tail: [UInt8] = []
    private var done: ((_ status: Int?, _ result: CURLcode, _ message: String) -> Void)?
    private var released = false

    /// Sets the attempt up; nil when libcurl cannot (out of memory).
    init?(url: String, method: String, headers lines: [String], body: String?, timeout: Duration, redirects: Int,
          caFile: String?, insecure: Bool, done: @escaping (Int?, CURLcode, String) -> Void) {
        guard let easy = tcurl_easy_init() else { return nil }
        self.easy = easy
        self.done = done
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        let milliseconds = max(1, Int(timeout.nanoseconds / 1_000_000))
        _ = tcurl_easy_setopt_string(easy, CURLOPT_URL, url)
        _ = tcurl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = tcurl_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        _ = tcurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, redirects > 0 ? 1 : 0)
        _ = tcurl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, redirects)
        _ = tcurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, milliseconds)
        _ = tcurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = tcurl_easy_setopt_string(easy, CURLOPT_USERAGENT, "timerd/\(ControlHandler.version)")
        _ = tcurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        if let caFile { _ = tcurl_easy_setopt_string(easy, CURLOPT_CAINFO, caFile) }
        if insecure {
            _ = tcurl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 0)
            _ = tcurl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 0)
        }
        switch method {
        case "GET": _ = tcurl_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
        case "HEAD": _ = tcurl_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
        case "POST": _ = tcurl_easy_setopt_long(easy, CURLOPT_POST, 1)
        default: _ = tcurl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method)
        }
        if let body {
            _ = tcurl_easy_setopt_long(easy, CURLOPT_POSTFIELDSIZE, body.utf8.count)
            _ = tcurl_easy_setopt_string(easy, CURLOPT_COPYPOSTFIELDS, body)
        }
        // No "Expect: 100-continue" round trip before a body.
        for line in lines + ["Expect:"] { self.headers = tcurl_slist_append(self.headers, line) }
        _ = tcurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, self.headers)
        _ = tcurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(self).toOpaque())
        _ = tcurl_easy_setopt_write(easy) { data, size, count, context in
            let transfer = Unmanaged<WebhookTransfer>.fromOpaque(context!).takeUnretainedValue()
            let bytes = size * count
            transfer.keep(UnsafeRawBufferPointer(start: data, count: bytes))
            return bytes
        }
    }

    deinit { release() }

    private func keep(_ bytes: UnsafeRawBufferPointer) {
        tail.append(contentsOf: bytes.suffix(Limits.outputTailBytes))
        if tail.count > Limits.outputTailBytes { tail.removeFirst(tail.count - Limits.outputTailBytes) }
    }

    /// Reports the attempt's end once, then frees the handle.
    func finish(result: CURLcode, message: String?) {
        var status = 0
        _ = tcurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        let text = message ?? {
            let buffer = String(cString: errorBuffer)
            return buffer.isEmpty ? String(cString: tcurl_easy_strerror(result)) : buffer
        }()
        let done = self.done
        release()
        done?(status == 0 ? nil : status, result, text)
    }

    func release() {
        guard !released else { return }
        released = true
        done = nil
        tcurl_easy_cleanup(easy)
        tcurl_slist_free_all(headers)
        headers = nil
        errorBuffer.deallocate()
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
    private var current: WebhookTransfer?
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
        guard let transfer = WebhookTransfer(
            url: hook.url, method: hook.method, headers: headers, body: request.webhookBody, timeout: timeout,
            redirects: hook.redirects, caFile: hook.caFile, insecure: hook.insecure,
            done: { [self] status, result, message in self.attemptEnded(status: status, result: result, message: message) })
        else {
            return finish(.failed, status: nil, reason: "cannot set up the request (out of memory)", output: [])
        }
        current = transfer
        launcher.send(transfer)
    }

    private func attemptEnded(status: Int?, result: CURLcode, message: String) {
        guard let transfer = current, !finished else { return }
        current = nil
        let (outcome, why) = Self.judge(status: status, result: result, message: message, hook: hook, timeout: timeout)
        if outcome == .ok {
            return finish(.ok, status: status, reason: why, output: transfer.tail)
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
        finish(outcome, status: status, reason: why + suffix, output: transfer.tail)
    }

    /// Ok or not, and why, for one attempt.
    static func judge(status: Int?, result: CURLcode, message: String, hook: Webhook, timeout: Duration) -> (RunOutcome.Result, String) {
        switch result {
        case CURLE_OK:
            let status = status ?? 0
            if hook.expect.contains(status) { return (.ok, "status \(status)") }
            let redirect = (300...399).contains(status) && hook.redirects == 0 ? " (redirect not followed: redirects=0)" : ""
            return (.failed, "status \(status)\(redirect), expected \(hook.expect)")
        case CURLE_OPERATION_TIMEDOUT:
            return (.timeout, "timed out after \(DurationText.format(timeout))")
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return (.failed, "DNS: \(message)")
        case CURLE_COULDNT_CONNECT:
            return (.failed, "connect: \(message)")
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM,
             CURLE_SSL_CIPHER, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS:
            return (.failed, "TLS: \(message)")
        case CURLE_TOO_MANY_REDIRECTS:
            return (.failed, "more than \(hook.redirects) redirect\(hook.redirects == 1 ? "" : "s"): \(message)")
        default:
            return (.failed, message)
        }
    }

    /// Before retry `retry` (1-based): a random time in [d/2, d], d = min(base·2^(retry−1), maximum).
    static func backoff(_ base: Duration, retry: Int) -> Duration {
        var ceiling = base
        for _ in 1..<max(1, retry) where ceiling < Webhook.maximumBackoff { ceiling = ceiling * 2 }
        ceiling = min(ceiling, Webhook.maximumBackoff)
        return ceiling * Double.random(in: 0.5...1.0)
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

internal import CTimerdCurl
import Dispatch
import TimerdSystem

/// Many exchanges at once without a thread each: libcurl's multi interface on a serial Dispatch queue.
/// Every exchange of a session shares one multi handle (one connection cache, so connections to the same
/// server are reused); its sockets are watched by the `IOWatcher` thread and its timeouts by one Dispatch
/// timer, and everything runs on `queue`.
///
/// Everything mutable is confined to `queue`, and every method must be called on it: libcurl calls the
/// socket and timer callbacks only from inside `curl_multi_*` calls, which happen only on `queue`.
public final class HTTPSession: @unchecked Sendable {
    public let queue: DispatchQueue
    private let multi: UnsafeMutableRawPointer
    private var sockets: [Int32: IOWatcher.Registration] = [:]
    private var exchanges: [UnsafeMutableRawPointer: (exchange: HTTPExchange, done: (HTTPResponse) -> Void)] = [:]
    private let timer: any DispatchSourceTimer
    /// Told when a socket cannot be watched (libcurl then times the transfer out).
    private let trouble: (String) -> Void

    /// Loads libcurl (`HTTPLibrary.load(library)`) and makes the multi handle. Call on `queue`.
    public init(queue: DispatchQueue, library: String, trouble: @escaping (String) -> Void) throws(HTTPFailure) {
        dispatchPrecondition(condition: .onQueue(queue))
        try HTTPLibrary.load(library)
        guard let multi = tcurl_multi_init() else { throw HTTPFailure(.setup, "curl_multi_init failed (out of memory)") }
        self.queue = queue
        self.multi = multi
        self.trouble = trouble
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self] in self?.drive(socket: -1, events: 0) }
        timer.schedule(deadline: .distantFuture)
        timer.resume()
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = tcurl_multi_setopt_socket(multi, { _, socket, what, context, _ in
            Unmanaged<HTTPSession>.fromOpaque(context!).takeUnretainedValue().socketChanged(socket, what: what)
            return 0
        }, context)
        _ = tcurl_multi_setopt_timer(multi, { _, milliseconds, context in
            Unmanaged<HTTPSession>.fromOpaque(context!).takeUnretainedValue().timeoutChanged(milliseconds)
            return 0
        }, context)
    }

    /// Starts `exchange`; `done` runs on `queue` when it ends, unless it is abandoned first.
    public func start(_ exchange: HTTPExchange, done: @escaping (HTTPResponse) -> Void) {
        dispatchPrecondition(condition: .onQueue(queue))
        exchanges[exchange.easy] = (exchange, done)
        let code = tcurl_multi_add_handle(multi, exchange.easy)
        if code != CURLM_OK {
            exchanges[exchange.easy] = nil
            done(exchange.response(CURLE_FAILED_INIT, message: "curl_multi_add_handle: \(String(cString: tcurl_multi_strerror(code)))"))
        }
    }

    /// Drops an exchange in flight; its `done` is never called.
    public func abandon(_ exchange: HTTPExchange) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard exchanges.removeValue(forKey: exchange.easy) != nil else { return }
        tcurl_multi_remove_handle(multi, exchange.easy)
    }

    /// Ends the session: exchanges in flight are dropped (their `done` is never called), the sockets are
    /// no longer watched and the multi handle is freed. Call on `queue`, once; nothing may use the
    /// session after. (The daemon's session lives as long as the daemon; tests end theirs.)
    public func close() {
        dispatchPrecondition(condition: .onQueue(queue))
        timer.cancel()
        for easy in Array(exchanges.keys) { tcurl_multi_remove_handle(multi, easy) }
        exchanges = [:]
        for registration in sockets.values { IOWatcher.shared.cancel(registration) }
        sockets = [:]
        tcurl_multi_cleanup(multi)
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
            trouble("cannot watch socket \(socket): \(error)")
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

    /// Lets curl act on a ready socket (or on its timeout, for socket -1), then reports finished exchanges.
    private func drive(socket: Int32, events: Int32) {
        var running: Int32 = 0
        _ = tcurl_multi_socket_action(multi, socket, events, &running)
        var left: Int32 = 0
        while let message = tcurl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let result = tcurl_message_result(message)
            tcurl_multi_remove_handle(multi, easy)
            guard let (exchange, done) = exchanges.removeValue(forKey: easy) else { continue }
            done(exchange.response(result))
        }
    }
}

internal import CTimerdCurl
import TimerdSystem

/// libcurl, loaded with `dlopen` on first use (see CTimerdCurl.h): a daemon that never makes an HTTP
/// request never loads it.
public enum HTTPLibrary {
    /// Loads `library` (normally `libcurl.so.4`) and sets it up, once per process; later calls return the
    /// first call's outcome whatever they name. Safe from any thread.
    public static func load(_ library: String) throws(HTTPFailure) {
        var error = [CChar](repeating: 0, count: 512)
        guard tcurl_load(library, &error, error.count) == 0 else {
            throw HTTPFailure(.setup, String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }
}

/// One request on a libcurl easy handle: the options of an `HTTPRequest`, the response body collected as
/// it arrives, and its outcome. Made blocking on the calling thread (`perform`, `stream`) or handed to an
/// `HTTPSession`. Used by one thread at a time, never shared (hence not `Sendable`). `HTTPLibrary.load`
/// must have succeeded first.
public final class HTTPExchange {
    let easy: UnsafeMutableRawPointer
    /// Where the handle goes back when the exchange ends (nil: it is cleaned up).
    private let pool: HTTPHandlePool?
    private let keep: HTTPRequest.BodyKeeping
    /// What has arrived of the body and not been taken yet (`takeLines`).
    private(set) var received: [UInt8] = []
    private var headers: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

    /// nil when libcurl cannot make a handle (out of memory). With a `pool`, the handle comes from it
    /// (with its open connections) and goes back to it.
    public init?(_ request: HTTPRequest, pool: HTTPHandlePool? = nil) {
        guard let easy = pool?.take() ?? tcurl_easy_init() else { return nil }
        self.easy = easy
        self.pool = pool
        keep = request.keep
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        _ = tcurl_easy_setopt_string(easy, CURLOPT_URL, request.url)
        _ = tcurl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = tcurl_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        _ = tcurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, request.redirects > 0 ? 1 : 0)
        _ = tcurl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, request.redirects)
        if request.bypassProxy { _ = tcurl_easy_setopt_string(easy, CURLOPT_PROXY, "") }
        _ = tcurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = tcurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, request.timeout.map(Self.milliseconds) ?? 0)
        if let connect = request.connectTimeout {
            _ = tcurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(connect))
        }
        if let agent = request.userAgent { _ = tcurl_easy_setopt_string(easy, CURLOPT_USERAGENT, agent) }
        _ = tcurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        if let ca = request.tls.caFile { _ = tcurl_easy_setopt_string(easy, CURLOPT_CAINFO, ca) }
        if let cert = request.tls.certFile { _ = tcurl_easy_setopt_string(easy, CURLOPT_SSLCERT, cert) }
        if let key = request.tls.keyFile { _ = tcurl_easy_setopt_string(easy, CURLOPT_SSLKEY, key) }
        if !request.tls.verify {
            _ = tcurl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 0)
            _ = tcurl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 0)
        }
        switch request.method {
        case "GET": _ = tcurl_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
        case "HEAD": _ = tcurl_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
        case "POST": _ = tcurl_easy_setopt_long(easy, CURLOPT_POST, 1)
        default: _ = tcurl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method)
        }
        // A POST without a body sends an empty one (libcurl would read one from stdin).
        if let body = request.body ?? (request.method == "POST" ? [] : nil) {
            _ = tcurl_easy_setopt_long(easy, CURLOPT_POSTFIELDSIZE, body.count)
            // libcurl copies POSTFIELDSIZE bytes; the terminator keeps the pointer non-null for an empty body.
            (body + [0]).withUnsafeBufferPointer { bytes in
                _ = tcurl_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress))
            }
        }
        for line in request.headers + ["Expect:"] { headers = tcurl_slist_append(headers, line) }
        _ = tcurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headers)
        _ = tcurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(self).toOpaque())
        _ = tcurl_easy_setopt_write(easy) { data, size, count, context in
            let exchange = Unmanaged<HTTPExchange>.fromOpaque(context!).takeUnretainedValue()
            let bytes = size * count
            exchange.keep(UnsafeRawBufferPointer(start: data, count: bytes))
            return bytes
        }
    }

    deinit {
        if let pool { pool.give(easy) } else { tcurl_easy_cleanup(easy) }
        tcurl_slist_free_all(headers)
        errorBuffer.deallocate()
    }

    /// At least 1 ms: 0 would mean no limit.
    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return max(1, Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000))
    }

    private func keep(_ bytes: UnsafeRawBufferPointer) {
        switch keep {
        case .all:
            received.append(contentsOf: bytes)
        case .last(let limit):
            received.append(contentsOf: bytes.suffix(limit))
            if received.count > limit { received.removeFirst(received.count - limit) }
        }
    }

    /// The HTTP status of the reply; nil before one arrived.
    var status: Int? {
        var status = 0
        _ = tcurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return status == 0 ? nil : status
    }

    /// The outcome once the transfer ended with `code` (`message`: a reason of our own instead of
    /// libcurl's); takes what is left of the body.
    func response(_ code: CURLcode, message: String? = nil) -> HTTPResponse {
        var failure: HTTPFailure?
        if code != CURLE_OK {
            let detail = String(cString: errorBuffer)
            let text = message ?? (detail.isEmpty ? String(cString: tcurl_easy_strerror(code)) : detail)
            failure = HTTPFailure(Self.kind(of: code), text)
        }
        let body = received
        received = []
        return HTTPResponse(status: status, body: body, failure: failure)
    }

    /// What kind of failure libcurl's `code` is.
    static func kind(of code: CURLcode) -> HTTPFailure.Kind {
        switch code {
        case CURLE_OPERATION_TIMEDOUT: .timedOut
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: .resolve
        case CURLE_COULDNT_CONNECT: .connect
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM,
             CURLE_SSL_CIPHER, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS: .tls
        case CURLE_TOO_MANY_REDIRECTS: .tooManyRedirects
        case CURLE_FAILED_INIT, CURLE_OUT_OF_MEMORY: .setup
        default: .other
        }
    }

    /// The whole exchange, blocking the calling thread.
    public func perform() -> HTTPResponse { response(tcurl_easy_perform(easy)) }

    /// How `stream` ended.
    public enum StreamEnd<Outcome> {
        /// `check` or `line` returned this; the transfer was dropped.
        case stopped(Outcome)
        /// The transfer ended by itself; the body holds what came after the last newline.
        case ended(HTTPResponse)
    }

    /// A streamed response (one message per line), blocking the calling thread: `line` gets each
    /// non-empty line (without its `\n`) as it arrives, and `check` runs at least every `interval`
    /// even when nothing arrives (libcurl's own progress callback would run only once a second on an
    /// idle stream). A non-nil value from either ends the transfer at once.
    public func stream<Outcome>(checkEvery interval: Duration, check: () -> Outcome?,
                                line: ([UInt8]) -> Outcome?) -> StreamEnd<Outcome> {
        guard let multi = tcurl_multi_init() else {
            return .ended(response(CURLE_OUT_OF_MEMORY, message: "cannot set up the stream (out of memory)"))
        }
        _ = tcurl_multi_add_handle(multi, easy)
        defer {
            tcurl_multi_remove_handle(multi, easy)
            tcurl_multi_cleanup(multi)
        }
        while true {
            if let outcome = check() { return .stopped(outcome) }
            var running: Int32 = 0
            _ = tcurl_multi_perform(multi, &running)
            for complete in takeLines() where !complete.isEmpty {
                if let outcome = line(complete) { return .stopped(outcome) }
            }
            if running == 0 { break }
            _ = tcurl_multi_poll(multi, Int32(Self.milliseconds(interval)), nil)
        }
        var left: Int32 = 0
        var code = CURLE_OK
        while let message = tcurl_multi_info_read(multi, &left) {
            if message.pointee.msg == CURLMSG_DONE { code = tcurl_message_result(message) }
        }
        return .ended(response(code))
    }

    /// Removes and returns the complete lines (without their `\n`) received so far.
    func takeLines() -> [[UInt8]] {
        guard let last = received.lastIndex(of: UInt8(ascii: "\n")) else { return [] }
        let lines = received[..<last].split(separator: UInt8(ascii: "\n")).map(Array.init)
        received.removeSubrange(...last)
        return lines
    }
}

/// Idle easy handles kept for the next request: a handle keeps its connections open, so a request
/// reuses the TCP (and TLS) connection of an earlier one instead of opening one each time (an etcd claim
/// is one request; a new connection per claim also left a socket in TIME_WAIT per claim).
public final class HTTPHandlePool: @unchecked Sendable {
    /// A handle owned by the pool while idle (only one thread uses it at a time).
    private struct Idle: @unchecked Sendable { let easy: UnsafeMutableRawPointer }
    private let idle = Locked<[Idle]>([])
    private let capacity: Int

    public init(capacity: Int) { self.capacity = capacity }

    deinit { for handle in idle.withLock({ $0 }) { tcurl_easy_cleanup(handle.easy) } }

    /// An idle handle with its options reset (its connections kept), or nil when none is idle.
    func take() -> UnsafeMutableRawPointer? {
        guard let handle = idle.withLock({ $0.popLast() }) else { return nil }
        tcurl_easy_reset(handle.easy)
        return handle.easy
    }

    /// Keeps `easy` for a later request, or cleans it up when enough are idle.
    func give(_ easy: UnsafeMutableRawPointer) {
        let handle = Idle(easy: easy)
        let kept = idle.withLock { handles -> Bool in
            guard handles.count < capacity else { return false }
            handles.append(handle)
            return true
        }
        if !kept { tcurl_easy_cleanup(easy) }
    }
}

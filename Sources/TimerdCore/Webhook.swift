/// A webhook job's HTTP request, as its keys describe it (`webhook=`, `method=`, `header=`, …). Pure
/// model: validated here, sent by the daemon's webhook runner (libcurl). See `docs/webhooks.md`.
public struct Webhook: Equatable, Sendable {
    public var url: String
    /// Upper-case: one of `methods`.
    public var method: String
    /// `Name: value`, in order.
    public var headers: [String]
    /// The body template (placeholders `{job}`, `{run}`, …); nil for the default JSON body.
    public var body: String?
    public var contentType: String?
    /// Further attempts after a failed one.
    public var retries: Int
    public var retryBackoff: Duration
    public var expect: StatusSet
    public var redirects: Int
    public var caFile: String?
    public var insecure: Bool

    public static let methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
    /// Per attempt, when the job sets no `timeout`.
    public static let defaultTimeout = Duration.seconds(30)
    public static let defaultBackoff = Duration.seconds(1)
    /// The longest wait between two attempts.
    public static let maximumBackoff = Duration.seconds(300)
    public static let maximumRetries = 10
    public static let maximumRedirects = 10
    public static let defaultContentType = "application/json"
    /// Keys that apply only to webhook jobs.
    public static let keys = [
        "method", "header", "body", "content_type", "expect", "retries", "retry_backoff", "redirects", "ca_file",
        "insecure",
    ]

    public init(
        url: String, method: String = "POST", headers: [String] = [], body: String? = nil, contentType: String? = nil,
        retries: Int = 0, retryBackoff: Duration = Webhook.defaultBackoff, expect: StatusSet = .success,
        redirects: Int = 0, caFile: String? = nil, insecure: Bool = false
    ) {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
        self.contentType = contentType
        self.retries = retries
        self.retryBackoff = retryBackoff
        self.expect = expect
        self.redirects = redirects
        self.caFile = caFile
        self.insecure = insecure
    }

    /// Whether the request carries a body (not for GET and HEAD).
    public var hasBody: Bool { method != "GET" && method != "HEAD" }

    /// The URL for logs: scheme, host, port and path; never the user:password or the query.
    public var redactedURL: String { Self.redact(url) }

    public static func redact(_ url: String) -> String {
        guard let schemeEnd = schemeSeparator(url) else { return "(invalid URL)" }
        let scheme = url[..<schemeEnd.lowerBound]
        var rest = url[schemeEnd.upperBound...]
        if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        return "\(scheme)://\(authority)\(rest[authorityEnd...])"
    }

    /// Where `://` is in `url`.
    static func schemeSeparator(_ url: String) -> Range<String.Index>? {
        var index = url.startIndex
        while index < url.endIndex {
            if url[index...].hasPrefix("://") { return index..<url.index(index, offsetBy: 3) }
            index = url.index(after: index)
        }
        return nil
    }

    // MARK: - Validation

    /// Checks a `webhook=` URL: http or https, a host, no spaces or control characters. libcurl parses it
    /// fully when it sends the request.
    public static func validateURL(_ text: String) throws(TimerdError) -> String {
        let lower = text.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
            throw TimerdError(.badArgument, "webhook: expected an http:// or https:// URL, got \"\(text)\"", key: "webhook")
        }
        guard !text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) else {
            throw TimerdError(.badArgument, "webhook: the URL contains a space or a control character", key: "webhook")
        }
        let afterScheme = text[schemeSeparator(text)!.upperBound...]
        let authority = afterScheme.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = authority.split(separator: "@", omittingEmptySubsequences: false).last ?? ""
        guard !host.isEmpty, !host.hasPrefix(":") else {
            throw TimerdError(.badArgument, "webhook: the URL has no host: \"\(redact(text))\"", key: "webhook")
        }
        return text
    }

    /// `Name: value` with an HTTP token name and no CR or LF; returned as `Name: value` (one space).
    public static func validateHeader(_ text: String) throws(TimerdError) -> String {
        guard let colon = text.firstIndex(of: ":") else {
            throw TimerdError(.badArgument, "header: expected \"Name: value\", got \"\(text)\"", key: "header")
        }
        let name = text[..<colon]
        let value = text[text.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
        let token = "!#$%&'*+-.^_`|~"
        guard !name.isEmpty, name.unicodeScalars.allSatisfy({
            ($0.value < 0x80 && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || token.unicodeScalars.contains($0)
        }) else {
            throw TimerdError(.badArgument, "header: invalid name \"\(name)\" (letters, digits and !#$%&'*+-.^_`|~)", key: "header")
        }
        guard !text.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }) else {
            throw TimerdError(.badArgument, "header: a header cannot contain a line break", key: "header")
        }
        return "\(name): \(value)"
    }

    // MARK: - Body

    /// The placeholders a body may use (plus `{meta.KEY}`).
    public static let placeholders = ["job", "run", "scheduled_at", "fired_at"]

    /// Checks that every placeholder in `template` is known, and that each `{meta.KEY}` names a `meta` key
    /// of the job.
    public static func validateBody(_ template: String, metaKeys: [String]) throws(TimerdError) {
        let metaKeys = Set(metaKeys)
        do {
            _ = try render(template) { name in
                if placeholders.contains(name) { return "" }
                if name.hasPrefix("meta."), metaKeys.contains(String(name.dropFirst(5))) { return "" }
                return nil
            }
        } catch {
            throw TimerdError(.badArgument, "body: \(error.message)", key: "body")
        }
    }

    /// Fills the placeholders of `template`: `{NAME}` where NAME is letters, digits, `_` and `.`; `value`
    /// returns nil for an unknown name, which is an error (a typo, not text to send). Any other brace is
    /// text, so JSON bodies need no escaping; `{{` is a literal `{` (to send `{job}` itself, write `{{job}`).
    public static func render(_ template: String, value: (String) -> String?) throws(TimerdError) -> String {
        let scalars = Array(template.unicodeScalars)
        func isNameScalar(_ scalar: Unicode.Scalar) -> Bool {
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "_" || scalar == ".")
        }
        var out = String.UnicodeScalarView()
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            guard scalar == "{" else {
                out.append(scalar)
                index += 1
                continue
            }
            if index + 1 < scalars.count, scalars[index + 1] == "{" {
                out.append("{")
                index += 2
                continue
            }
            var end = index + 1
            while end < scalars.count, isNameScalar(scalars[end]) { end += 1 }
            guard end > index + 1, end < scalars.count, scalars[end] == "}" else {
                out.append(scalar)
                index += 1
                continue
            }
            var name = ""
            name.unicodeScalars.append(contentsOf: scalars[(index + 1)..<end])
            guard let text = value(name) else {
                let known = (placeholders.map { "{\($0)}" } + ["{meta.KEY}"]).joined(separator: ", ")
                throw TimerdError(.badArgument, "unknown placeholder {\(name)} (known: \(known); write {{ for a literal brace)")
            }
            out.append(contentsOf: text.unicodeScalars)
            index = end + 1
        }
        return String(out)
    }
}

/// The HTTP statuses that count as success (`expect=`): codes, ranges and classes, e.g. `2xx,304` or
/// `200-299`.
public struct StatusSet: Equatable, Sendable, CustomStringConvertible {
    public let ranges: [ClosedRange<Int>]
    /// The canonical text (what `options` writes back).
    public let description: String

    public static let success = StatusSet(ranges: [200...299], description: "2xx")

    private init(ranges: [ClosedRange<Int>], description: String) {
        self.ranges = ranges
        self.description = description
    }

    public func contains(_ status: Int) -> Bool { ranges.contains { $0.contains(status) } }

    public static func parse(_ text: String) throws(TimerdError) -> StatusSet {
        func fail() -> TimerdError {
            TimerdError(.badArgument, "expect: expected statuses like 2xx, 204 or 200-299 (comma-separated), got \"\(text)\"", key: "expect")
        }
        func code(_ part: Substring) throws(TimerdError) -> Int {
            guard part.count == 3, part.allSatisfy(\.isASCII), let value = Int(part), (100...599).contains(value) else { throw fail() }
            return value
        }
        var ranges: [ClosedRange<Int>] = []
        var words: [String] = []
        for raw in text.split(separator: ",", omittingEmptySubsequences: false) {
            let part = raw.trimmingSpaces().lowercased()[...]
            if part.count == 3, part.hasSuffix("xx"), let digit = part.first?.wholeNumberValue, (1...5).contains(digit) {
                ranges.append(digit * 100...digit * 100 + 99)
            } else if let dash = part.firstIndex(of: "-") {
                let low = try code(part[..<dash]), high = try code(part[part.index(after: dash)...])
                guard low <= high else { throw fail() }
                ranges.append(low...high)
            } else {
                ranges.append(try code(part)...code(part))
            }
            words.append(String(part))
        }
        guard !ranges.isEmpty else { throw fail() }
        return StatusSet(ranges: ranges, description: words.joined(separator: ","))
    }
}

/// Where `on_failure=` / `on_recovery=` send their notice: a URL (POSTed as JSON) or a shell command.
public enum NotifyTarget: Equatable, Sendable, CustomStringConvertible {
    case url(String)
    case command(String)

    public static func parse(_ text: String, key: String) throws(TimerdError) -> NotifyTarget {
        let lower = text.lowercased()
        if lower.hasPrefix("http://") || lower.hasPrefix("https://") {
            do { return .url(try Webhook.validateURL(text)) } catch {
                throw TimerdError(.badArgument, "\(key): \(error.message.replacingPrefix("webhook: ", with: ""))", key: key)
            }
        }
        guard !text.allSatisfy({ $0.isWhitespace }) else {
            throw TimerdError(.badArgument, "\(key): expected a URL or a shell command, got nothing", key: key)
        }
        return .command(text)
    }

    public var description: String {
        switch self {
        case .url(let url): return url
        case .command(let line): return line
        }
    }
}

extension Substring {
    func trimmingSpaces() -> Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text = text.dropFirst() }
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        return text
    }
}

extension String {
    func replacingPrefix(_ prefix: String, with replacement: String) -> String {
        hasPrefix(prefix) ? replacement + dropFirst(prefix.count) : self
    }
}

/// How a failed run is tried again (`retries`, `retry_backoff`): up to `retries` more attempts, attempt k+1
/// a random time in [d/2, d] after attempt k failed, d = min(backoff·2^(k−1), `Webhook.maximumBackoff`).
public struct RetryPolicy: Equatable, Sendable {
    public var retries: Int
    public var backoff: Duration

    public init(retries: Int, backoff: Duration) {
        self.retries = retries
        self.backoff = backoff
    }

    /// d before retry `retry` (1-based): `base`·2^(retry−1), at most `Webhook.maximumBackoff`.
    public static func ceiling(_ base: Duration, retry: Int) -> Duration {
        var ceiling = base
        for _ in 1..<max(1, retry) where ceiling < Webhook.maximumBackoff { ceiling = ceiling * 2 }
        return min(ceiling, Webhook.maximumBackoff)
    }
}

import Testing
import TimerdProtocol

/// Reference model: split the whole stream at once, the obvious way.
private func reference(_ stream: [UInt8], cap: Int) -> (events: [FramedLine], rest: [UInt8]?) {
    var events: [FramedLine] = []
    var parts = stream.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map(Array.init)
    let last = parts.removeLast()  // what follows the last newline
    for var part in parts {
        if part.last == UInt8(ascii: "\r") { part.removeLast() }
        events.append(part.count > cap ? .tooLong : .line(part))
    }
    let body = last.count - (last.last == UInt8(ascii: "\r") ? 1 : 0)
    if body > cap {
        events.append(.tooLong)
        return (events, nil)
    }
    return (events, last.isEmpty ? nil : last)
}

private func feed(_ stream: [UInt8], cap: Int, chunkSizes: inout some RandomNumberGenerator, maxChunk: Int) -> (
    [FramedLine], [UInt8]?
) {
    var framer = LineFramer(maxLineBytes: cap)
    var events: [FramedLine] = []
    var i = 0
    while i < stream.count {
        let n = min(stream.count - i, Int.random(in: 1...maxChunk, using: &chunkSizes))
        events += framer.append(stream[i..<(i + n)])
        #expect(framer.bufferedByteCount <= cap + 1)
        i += n
    }
    return (events, framer.finish())
}

private func lines(_ strings: String...) -> [FramedLine] { strings.map { .line(Array($0.utf8)) } }

@Suite("LineFramer")
struct LineFramerTests {
    @Test("basic lines, empty lines, finish")
    func basic() {
        var f = LineFramer()
        #expect(f.append("PING\nLIST\n\n".utf8) == lines("PING", "LIST", ""))
        #expect(f.append("partial".utf8) == [])
        #expect(f.append(" more\n".utf8) == lines("partial more"))
        #expect(f.finish() == nil)
        #expect(f.maxLineBytes == 65536)
        #expect(LineFramer.defaultMaxLineBytes == 65536)
    }

    @Test("CRLF and stray CRs")
    func crlf() {
        var f = LineFramer()
        #expect(f.append("PING\r\nLIST\r\n\r\n".utf8) == lines("PING", "LIST", ""))
        #expect(f.append("a\r\r\n".utf8) == lines("a\r"))  // only one CR is stripped
        #expect(f.append("a\rb\n".utf8) == lines("a\rb"))  // an inner CR is data
        #expect(f.append("\r".utf8) == [])
        #expect(f.append("\n".utf8) == lines(""))  // CR and LF in different chunks
        #expect(f.append("x\r".utf8) == [])
        #expect(f.append("y\n".utf8) == lines("x\ry"))  // a held-back CR followed by data is data
        #expect(f.finish() == nil)
    }

    @Test("finish returns the unterminated remainder and resets")
    func finishRemainder() {
        var f = LineFramer()
        #expect(f.append("DONE\nhalf a req".utf8) == lines("DONE"))
        #expect(f.bufferedByteCount == 10)
        #expect(f.finish() == Array("half a req".utf8))
        #expect(f.bufferedByteCount == 0)
        #expect(f.finish() == nil)
        #expect(f.append("x\r".utf8) == [])
        #expect(f.finish() == Array("x\r".utf8))
        #expect(f.append("\n".utf8) == lines(""))  // fresh state after finish
        #expect(f.append("\r".utf8) == [])
        #expect(f.finish() == [UInt8(ascii: "\r")])
    }

    @Test("exactly at the cap and one past it")
    func capBoundaries() {
        let cap = 8
        var f = LineFramer(maxLineBytes: cap)
        #expect(f.append("12345678\n".utf8) == lines("12345678"))
        #expect(f.append("12345678\r\n".utf8) == lines("12345678"))  // the terminator does not count
        #expect(f.append("123456789\n".utf8) == [.tooLong])
        #expect(f.append("1234567\r9\n".utf8) == [.tooLong])  // an inner CR counts
        #expect(f.append("12345678\r".utf8) == [])
        #expect(f.append("x".utf8) == [.tooLong])  // ...as soon as it turns out to be data
        #expect(f.append("\nok\n".utf8) == lines("ok"))
        #expect(f.append("12345678".utf8) == [])
        #expect(f.finish() == Array("12345678".utf8))
    }

    @Test("default cap is 65536 bytes")
    func defaultCap() {
        var f = LineFramer()
        let atCap = [UInt8](repeating: UInt8(ascii: "a"), count: 65536)
        #expect(f.append(atCap + [10]) == [.line(atCap)])
        #expect(f.append(atCap + [UInt8(ascii: "b"), 10]) == [.tooLong])
    }

    @Test("zero cap accepts only empty lines")
    func zeroCap() {
        var f = LineFramer(maxLineBytes: 0)
        #expect(f.append("\n\r\na\n\n".utf8) == [.line([]), .line([]), .tooLong, .line([])])
    }

    @Test("oversized line is reported once, immediately, then framing resumes")
    func oversized() {
        var f = LineFramer(maxLineBytes: 16)
        #expect(f.append([UInt8](repeating: 0x41, count: 17)) == [.tooLong])  // no newline needed
        #expect(f.bufferedByteCount == 0)
        for _ in 0..<100 {
            #expect(f.append([UInt8](repeating: 0x41, count: 1000)) == [])  // reported only once
            #expect(f.bufferedByteCount == 0)
        }
        #expect(f.append("AAA\nPING\n".utf8) == lines("PING"))
        #expect(f.append("\(String(repeating: "x", count: 40))\nok\n".utf8) == [.tooLong] + lines("ok"))
        // A too-long line that never ends leaves no remainder (already reported).
        #expect(f.append([UInt8](repeating: 0x42, count: 40)) == [.tooLong])
        #expect(f.finish() == nil)
    }

    @Test("memory stays bounded against a huge line without newline")
    func memoryBound() {
        var f = LineFramer(maxLineBytes: 1024)
        let chunk = [UInt8](repeating: 0x58, count: 4096)
        var events: [FramedLine] = []
        for _ in 0..<256 {  // 1 MiB
            events += f.append(chunk)
            #expect(f.bufferedByteCount <= 1024)
        }
        #expect(events == [.tooLong])
        var g = LineFramer(maxLineBytes: 1024)
        for _ in 0..<1024 { _ = g.append([0x58]) }
        #expect(g.bufferedByteCount == 1024)
        _ = g.append([0x0D])
        #expect(g.bufferedByteCount == 1025)  // held-back CR
        #expect(g.append([0x0A]) == [.line([UInt8](repeating: 0x58, count: 1024))])
    }

    @Test("large chunk with many lines is handled in one go")
    func bigChunk() {
        var stream: [UInt8] = []
        for i in 0..<100_000 { stream += Array("LINE \(i)\n".utf8) }
        #expect(stream.count > 1_000_000)
        var f = LineFramer()
        let clock = ContinuousClock()
        var events: [FramedLine] = []
        let elapsed = clock.measure { events = f.append(stream) }
        #expect(events.count == 100_000)
        #expect(events.last == .line(Array("LINE 99999".utf8)))
        #expect(elapsed < .seconds(10))  // generous: a quadratic framer takes minutes here
    }

    @Test("non-contiguous sequences frame the same")
    func nonContiguous() {
        let text = "a\nbb\r\n" + String(repeating: "z", count: 9000) + "\ntail"
        var f = LineFramer(maxLineBytes: 5000)
        var g = LineFramer(maxLineBytes: 5000)
        let lazy = text.utf8.lazy.map { $0 }  // a Sequence without contiguous storage
        #expect(f.append(lazy) == g.append(Array(text.utf8)))
        #expect(f.finish() == g.finish())
        #expect(g.finish() == nil)
    }

    static let corpora: [String] = [
        "PING\nLIST\r\nSHOW x\n\n\r\nEXEC -- a b\n",
        "short\n" + String(repeating: "L", count: 70) + "\nafter\n" + String(repeating: "M", count: 33) + "\r\nend",
        String(repeating: "\r", count: 40) + "\n" + String(repeating: "ab\r", count: 30) + "\n\r",
        "no newline at all " + String(repeating: "q", count: 100),
        "e\u{301}\u{301}日本👍🏽\nHALF",
        "",
    ]

    @Test("drip-feed: byte-by-byte, random chunks and all-at-once agree with the reference", arguments: corpora)
    func dripFeed(text: String) {
        let stream = Array(text.utf8)
        for cap in [0, 1, 2, 3, 32, 33, 34, 64, 1000] {
            let want = reference(stream, cap: cap)
            var all = LineFramer(maxLineBytes: cap)
            #expect(all.append(stream) == want.events, "cap \(cap)")
            #expect(all.finish() == want.rest)
            var one = LineFramer(maxLineBytes: cap)
            var events: [FramedLine] = []
            for b in stream { events += one.append(CollectionOfOne(b)) }
            #expect(events == want.events, "cap \(cap) byte-by-byte")
            #expect(one.finish() == want.rest)
            var rng = Xorshift(seed: UInt64(cap) &+ 1)
            for maxChunk in [2, 3, 7, 64] {
                let got = feed(stream, cap: cap, chunkSizes: &rng, maxChunk: maxChunk)
                #expect(got.0 == want.events, "cap \(cap) chunks ≤ \(maxChunk)")
                #expect(got.1 == want.rest)
            }
        }
    }

    @Test("random streams in random chunks match the reference")
    func randomStreams() {
        var rng = Xorshift(seed: 2024)
        let alphabet: [UInt8] = [0x61, 0x62, 0x0A, 0x0D, 0x0D, 0xC3, 0x20]
        for _ in 0..<400 {
            let cap = Int.random(in: 0...12, using: &rng)
            let stream = (0..<Int.random(in: 0...80, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
            let want = reference(stream, cap: cap)
            let got = feed(stream, cap: cap, chunkSizes: &rng, maxChunk: Int.random(in: 1...20, using: &rng))
            #expect(got.0 == want.events, "stream \(stream) cap \(cap)")
            #expect(got.1 == want.rest, "stream \(stream) cap \(cap)")
        }
    }
}

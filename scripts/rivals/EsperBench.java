// One pattern over a CSV of readings on Esper, in event time (external timer), for scripts/cep_rivals.py.
//
//   java -cp <esper jars>:<classes> EsperBench EVENTS.csv PATTERN WITHIN_MS MATCHES_OUT
//
// EVENTS.csv: lines `sensor,ts_ms,value`, ts ascending, no header. PATTERN: ab | neg | akc (see
// cep_rivals.py). Writes one line `sensor,a_ts,last_ts` per match to MATCHES_OUT and prints one line
// `RESULT {json}` with the timings: the CSV is read and the event objects made before the clock
// starts; `seconds` is the time of the send loop alone (advanceTime + sendEventBean per event).
// Compiled by cep_rivals.py at first use (javac into the cache dir).

import com.espertech.esper.common.client.EPCompiled;
import com.espertech.esper.common.client.EventBean;
import com.espertech.esper.common.client.configuration.Configuration;
import com.espertech.esper.compiler.client.CompilerArguments;
import com.espertech.esper.compiler.client.EPCompilerProvider;
import com.espertech.esper.runtime.client.EPDeployment;
import com.espertech.esper.runtime.client.EPEventService;
import com.espertech.esper.runtime.client.EPRuntime;
import com.espertech.esper.runtime.client.EPRuntimeProvider;
import com.espertech.esper.runtime.client.EPStatement;

import java.io.BufferedReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

public class EsperBench {
    public static final class E {
        private final String sensor;
        private final long ts;
        private final double value;

        public E(String sensor, long ts, double value) {
            this.sensor = sensor;
            this.ts = ts;
            this.value = value;
        }

        public String getSensor() { return sensor; }
        public long getTs() { return ts; }
        public double getValue() { return value; }
    }

    static String epl(String pattern, long withinMs) {
        String within = " where timer:within(" + withinMs + " msec)";
        String b = "E(sensor=a.sensor, value > a.value + 0.95)";
        switch (pattern) {
            case "ab":
                // (every a) -> (b where within): each a starts one b sub-expression, which (no every)
                // ends at the first qualifying event: the earliest b. The timer starts at a's time
                // and fires at a.ts + within before an event of that time is sent: b.ts - a.ts < within.
                return "@name('m') select a.sensor as sensor, a.ts as ats, b.ts as lts from pattern ["
                        + "every a=E(value > 9) -> (b=" + b + within + ")]";
            case "neg":
                // Every b (value > a.value + 0.95 > 9.95) is also an n (value > 9.9); an n with a
                // larger value than a.value + 0.95 would itself be the earliest b. So "no n strictly
                // between a and the first b" is "no event with 9.9 < value <= a.value + 0.95 before
                // it", and b and the negated event are disjoint (no same-event ordering question).
                return "@name('m') select a.sensor as sensor, a.ts as ats, b.ts as lts from pattern ["
                        + "every a=E(value > 9) -> ((b=" + b
                        + " and not E(sensor=a.sensor, value > 9.9, value <= a.value + 0.95))" + within + ")]";
            case "akc":
                // The first b (value < 5), then every later b until c, the first event with
                // value > a.value + 0.95 after the first b (one before the first b is skipped, as
                // skip-till-next skips an event that does not fit the state it is in).
                return "@name('m') select a.sensor as sensor, a.ts as ats, c.ts as lts from pattern ["
                        + "every a=E(value > 9) -> ((b1=E(sensor=a.sensor, value < 5) -> "
                        + "(bs=E(sensor=a.sensor, value < 5) until c=" + b + "))" + within + ")]";
            default:
                throw new IllegalArgumentException("unknown pattern " + pattern);
        }
    }

    public static void main(String[] args) throws Exception {
        Path csv = Path.of(args[0]);
        String pattern = args[1];
        long withinMs = Long.parseLong(args[2]);
        Path out = Path.of(args[3]);

        long t0 = System.nanoTime();
        List<E> events = new ArrayList<>();
        Map<String, String> names = new HashMap<>();
        try (BufferedReader in = Files.newBufferedReader(csv, StandardCharsets.UTF_8)) {
            String line;
            while ((line = in.readLine()) != null) {
                int c1 = line.indexOf(','), c2 = line.indexOf(',', c1 + 1);
                if (c1 < 0 || c2 < 0) continue;
                String sensor = names.computeIfAbsent(line.substring(0, c1), s -> s);
                events.add(new E(sensor, Long.parseLong(line.substring(c1 + 1, c2).trim()),
                        Double.parseDouble(line.substring(c2 + 1).trim())));
            }
        }
        long t1 = System.nanoTime();

        Configuration config = new Configuration();
        config.getCommon().addEventType("E", E.class);
        config.getRuntime().getThreading().setInternalTimerEnabled(false);
        String text = epl(pattern, withinMs);
        EPCompiled compiled = EPCompilerProvider.getCompiler().compile(text, new CompilerArguments(config));
        EPRuntime runtime = EPRuntimeProvider.getRuntime("bench-" + pattern, config);
        runtime.initialize();
        EPEventService service = runtime.getEventService();
        long first = events.isEmpty() ? 0 : events.get(0).ts;
        service.advanceTime(first);  // the clock at the first event's time before any timer is scheduled
        EPDeployment deployment = runtime.getDeploymentService().deploy(compiled);
        EPStatement statement = runtime.getDeploymentService().getStatement(deployment.getDeploymentId(), "m");
        List<String> matches = new ArrayList<>();
        statement.addListener((newEvents, oldEvents, st, rt) -> {
            if (newEvents == null) return;
            for (EventBean e : newEvents) {
                matches.add(e.get("sensor") + "," + e.get("ats") + "," + e.get("lts"));
            }
        });
        long t2 = System.nanoTime();

        long now = first;
        for (E e : events) {
            if (e.ts != now) {
                if (e.ts < now) throw new IllegalStateException("events out of time order at ts " + e.ts);
                service.advanceTime(e.ts);
                now = e.ts;
            }
            service.sendEventBean(e, "E");
        }
        long t3 = System.nanoTime();

        Shared.writeLines(out, matches);
        System.out.println(String.format(Locale.ROOT,
                "RESULT {\"events\": %d, \"matches\": %d, \"seconds\": %.6f, \"load_seconds\": %.6f, "
                        + "\"setup_seconds\": %.6f, \"peak_rss_kib\": %d, \"epl\": \"%s\"}",
                events.size(), matches.size(), (t3 - t2) / 1e9, (t1 - t0) / 1e9, (t2 - t1) / 1e9, Shared.peakKiB(),
                Shared.quoted(text)));
        runtime.destroy();
    }
}

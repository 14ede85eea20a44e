package dev.vmmkit.core;

import dev.vmmkit.driver.host.HostDriver;

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.util.HashMap;
import java.util.zip.GZIPInputStream;

/** Throwaway probe: replays the BERT trace through a manager on the host driver. */
public class BertTraceProbe {
    public static void main(String[] args) throws Exception {
        String path = args.length > 0 ? args[0] : "../shared/traces/bert_infer.csv.gz";
        long chunk = args.length > 1 ? VmmConfig.parseBytes(args[1]) : 0;
        double slack = args.length > 2 ? Double.parseDouble(args[2]) : 1.02;
        java.util.List<long[]> ops = new java.util.ArrayList<>();
        try (BufferedReader r = new BufferedReader(new InputStreamReader(new GZIPInputStream(new FileInputStream(path))))) {
            String line;
            while ((line = r.readLine()) != null) {
                if (line.startsWith("#")) continue;
                String[] f = line.split(",");
                if (f[0].equals("alloc")) ops.add(new long[]{0, Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3])});
                else if (f[0].equals("free_completed")) ops.add(new long[]{1, Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3])});
            }
        }
        for (int rep = 0; rep < 3; rep++) {
            try (HostDriver d = HostDriver.builder().build();
                 VmmManager m = new VmmManager(d, VmmConfig.DEFAULTS.withChunkBytes(chunk).withReserveSlack(slack))) {
                HashMap<Long, Long> addr = new HashMap<>();
                long t0 = System.nanoTime();
                for (long[] op : ops) {
                    if (op[0] == 0) addr.put(op[1], m.allocate(op[2], op[3]));
                    else m.deallocate(addr.remove(op[1]), op[3]);
                }
                long t1 = System.nanoTime();
                AllocatorStats s = m.stats();
                System.out.printf("ratio %.4f peakLive %d peakRes %d hit %.4f ns/op %.1f calls %s%n",
                        s.fragmentationRatio(), s.peakLiveBytes(), s.peakReservedBytes(), s.hitRate(),
                        (t1 - t0) / (double) ops.size(), s.driverCalls());
            }
        }
    }
}

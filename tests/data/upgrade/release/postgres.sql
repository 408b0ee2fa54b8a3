--
-- PostgreSQL database dump
--

\restrict wMOygRZ2Fm49pF3l3CEMg0mcLoQY983IIJpxtBdB6pyfgXFOadwFfvo2SHp4M0h

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: ocd_fifo_ack(bigint, bigint[], smallint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ocd_fifo_ack(q bigint, seqs bigint[], shard smallint) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
  groups text[];
  n bigint;
  b bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(1868784675, q::integer);  -- FIFO_LOCK
  WITH d AS (
    DELETE FROM ocd_messages x WHERE x.seq = ANY (seqs) AND x.queue + 0 = q
    RETURNING x.size, x.grp)
  SELECT count(*), coalesce(sum(d.size), 0),
         array_agg(DISTINCT d.grp) FILTER (WHERE d.grp IS NOT NULL)
  INTO n, b, groups FROM d;
  IF n > 0 THEN
    INSERT INTO ocd_counts AS c (queue, shard, count, bytes) VALUES (q, shard, -n, -b)
    ON CONFLICT (queue, shard) DO UPDATE
    SET count = c.count + excluded.count, bytes = c.bytes + excluded.bytes;
  END IF;
  IF groups IS NOT NULL THEN
    PERFORM ocd_fifo_refresh(q, groups);
  END IF;
  PERFORM pg_notify('ocd_q_' || q, '');
  RETURN n;
END
$$;


--
-- Name: ocd_fifo_behind(bigint, text, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ocd_fifo_behind(q bigint, g text, after bigint, lease_id bigint) RETURNS SETOF bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
  m record;
BEGIN
  FOR m IN SELECT x.seq, x.lease FROM ocd_messages x
           WHERE x.queue = q AND x.grp = g AND x.fseq > after ORDER BY x.fseq LIMIT 1000 LOOP
    EXIT WHEN m.lease IS DISTINCT FROM lease_id;
    RETURN NEXT m.seq;
  END LOOP;
END
$$;


--
-- Name: ocd_fifo_claim(bigint, bigint, integer, bigint, bigint, smallint, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ocd_fifo_claim(q bigint, now_ms bigint, n integer, until_ms bigint, lease_id bigint, kind smallint, node text) RETURNS TABLE(seq bigint, id text, content_type text, body bytea, sent_ms bigint, attempts integer, grp text, fseq bigint, dedup text, attrs bytea, first_received_ms bigint, ord bigint)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
  gs text[];
  r record;
  picked bigint[] := '{}';
  taken text[] := '{}';
  stale text[] := '{}';
  run bigint[];
  k integer := 0;
  pos integer := 1;
  cnt integer;
  j integer;
BEGIN
  PERFORM pg_advisory_xact_lock(1868784675, q::integer);  -- FIFO_LOCK, for the transaction
  SELECT array_agg(o.grp ORDER BY o.ready_ms) INTO gs FROM (
    SELECT o.grp, o.ready_ms FROM ocd_groups o
    WHERE o.queue = q AND o.ready_ms <= now_ms ORDER BY o.ready_ms LIMIT n) AS o;
  WHILE gs IS NOT NULL AND pos <= cardinality(gs) AND k < n LOOP
    IF pos = 1 THEN
      cnt := 1;  -- the first group alone: its run says how deep the groups are
    ELSE
      cnt := least(cardinality(gs) - pos + 1,
                   greatest(1, ceil((n - k)::numeric / greatest(1, k / (pos - 1)))::integer));
    END IF;
    -- each asked group's next messages, in order (none: its row is stale)
    FOR r IN SELECT a.g, array_agg(x.seq ORDER BY x.fseq) AS seqs,
                    array_agg(x.visible_ms ORDER BY x.fseq) AS vis
             FROM unnest(gs[pos:pos + cnt - 1]) WITH ORDINALITY AS a (g, i)
             LEFT JOIN LATERAL (
               SELECT y.seq, y.visible_ms, y.fseq FROM ocd_messages y
               WHERE y.queue = q AND y.grp = a.g ORDER BY y.fseq LIMIT n - k) AS x ON true
             GROUP BY a.i, a.g ORDER BY a.i LOOP
      run := '{}';
      j := 1;
      WHILE r.seqs[j] IS NOT NULL AND r.vis[j] <= now_ms LOOP
        run := run || r.seqs[j];
        j := j + 1;
      END LOOP;
      IF cardinality(run) = 0 THEN
        stale := stale || r.g;
      ELSIF k < n THEN
        picked := picked || run[1:n - k];
        k := k + least(cardinality(run), n - k);
        taken := taken || r.g;
      END IF;
    END LOOP;
    pos := pos + cnt;
  END LOOP;
  IF cardinality(stale) > 0 THEN PERFORM ocd_fifo_refresh(q, stale); END IF;
  UPDATE ocd_groups o SET ready_ms = until_ms WHERE o.queue = q AND o.grp = ANY (taken);
  RETURN QUERY
    UPDATE ocd_messages x
    SET attempts = x.attempts + 1, visible_ms = until_ms, lease = lease_id,
        lease_kind = kind, owner = node,
        first_received_ms = coalesce(x.first_received_ms, now_ms)
    FROM unnest(picked) WITH ORDINALITY AS p (s, o)
    WHERE x.seq = p.s AND x.queue + 0 = q
    RETURNING x.seq, x.id, x.content_type, x.body, x.sent_ms, x.attempts, x.grp, x.fseq,
              x.dedup, x.attrs, x.first_received_ms, p.o;
END
$$;


--
-- Name: ocd_fifo_refresh(bigint, text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ocd_fifo_refresh(q bigint, groups text[]) RETURNS void
    LANGUAGE sql
    AS $$
  WITH h AS (
    SELECT g.grp, (SELECT x.visible_ms FROM ocd_messages x
                   WHERE x.queue = q AND x.grp = g.grp ORDER BY x.fseq LIMIT 1) AS head
    FROM (SELECT DISTINCT unnest(groups) AS grp) AS g),
  gone AS (
    DELETE FROM ocd_groups o USING h
    WHERE o.queue = q AND o.grp = h.grp AND h.head IS NULL)
  INSERT INTO ocd_groups AS o (queue, grp, ready_ms)
  SELECT q, h.grp, h.head FROM h WHERE h.head IS NOT NULL
  ON CONFLICT (queue, grp) DO UPDATE SET ready_ms = excluded.ready_ms;
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: ocd_consumers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ocd_consumers (
    key bigint NOT NULL,
    queue bigint NOT NULL,
    consumer_id text NOT NULL,
    created_ms bigint NOT NULL,
    dead_letter_queue text,
    settings text NOT NULL
);


--
-- Name: ocd_consumers_key_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.ocd_consumers_key_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: ocd_consumers_key_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.ocd_consumers_key_seq OWNED BY public.ocd_consumers.key;


--
-- Name: ocd_counts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ocd_counts (
    queue bigint NOT NULL,
    shard smallint NOT NULL,
    count bigint NOT NULL,
    bytes bigint NOT NULL
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='1000');


--
-- Name: ocd_cron_ticks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ocd_cron_ticks (
    schedule text NOT NULL,
    due_ms bigint NOT NULL,
    node text NOT NULL
);


--
-- Name: ocd_dedup; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ocd_dedup (
    queue bigint NOT NULL,
    scope text NOT NULL,
    dedup text NOT NULL,
    expires_ms bigint NOT NULL,
    message_id text NOT NULL,
    fseq bigint NOT NULL
);


--
-- Name: ocd_groups; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ocd_groups (
    queue bigint NOT NULL,
    grp text NOT NULL,
    ready_ms bigint NOT NULL
);


--
-- Name: ocd_messages; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ocd_messages (
    seq bigint NOT NULL,
    queue bigint NOT NULL,
    id text NOT NULL,
    content_type text NOT NULL,
    body bytea NOT NULL,
    size integer NOT NULL,
    sent_ms bigint NOT NULL,
    visible_ms bigint NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    lease bigint,
    lease_kind smallint,
    owner text,
    grp text,
    dedup text,
    fseq bigint,
    attrs bytea,
    first_received_ms bigint
)
WITH (autovacuum_vacuum_scale_factor='0.02', autovacuum_analyze_scale_factor='0.02');


--
-- Name: ocd_messages_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.ocd_messages_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: ocd_messages_seq_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.ocd_messages_seq_seq OWNED BY public.ocd_messages.seq;


--
-- Name: ocd_meta; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ocd_meta (
    key text NOT NULL,
    value bytea NOT NULL
);


--
-- Name: ocd_move_tasks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ocd_move_tasks (
    task_id text NOT NULL,
    account text NOT NULL,
    source_id text NOT NULL,
    source text NOT NULL,
    destination_id text,
    destination text,
    total bigint NOT NULL,
    started_ms bigint NOT NULL,
    done bigint DEFAULT 0 NOT NULL,
    state text NOT NULL,
    error text,
    finished_ms bigint,
    rate integer,
    bound_sent bigint,
    bound_seq bigint,
    cursor_sent bigint,
    cursor_seq bigint,
    spec text NOT NULL,
    node text NOT NULL
);


--
-- Name: ocd_nodes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ocd_nodes (
    node_id text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    heartbeat_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: ocd_queues; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ocd_queues (
    key bigint NOT NULL,
    account text NOT NULL,
    name text NOT NULL,
    queue_id text NOT NULL,
    created_ms bigint NOT NULL,
    modified_ms bigint NOT NULL,
    delivery_delay_s integer NOT NULL,
    retention_s integer NOT NULL,
    paused boolean NOT NULL,
    purged_ms bigint,
    content_dedup boolean DEFAULT false NOT NULL,
    dedup_scope text DEFAULT 'queue'::text NOT NULL,
    fifo_seq bigint DEFAULT 0 NOT NULL,
    sqs_attrs text,
    tags text
);


--
-- Name: ocd_queues_key_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.ocd_queues_key_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: ocd_queues_key_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.ocd_queues_key_seq OWNED BY public.ocd_queues.key;


--
-- Name: ocd_schema; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ocd_schema (
    version integer NOT NULL
);


--
-- Name: ocd_consumers key; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_consumers ALTER COLUMN key SET DEFAULT nextval('public.ocd_consumers_key_seq'::regclass);


--
-- Name: ocd_messages seq; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_messages ALTER COLUMN seq SET DEFAULT nextval('public.ocd_messages_seq_seq'::regclass);


--
-- Name: ocd_queues key; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_queues ALTER COLUMN key SET DEFAULT nextval('public.ocd_queues_key_seq'::regclass);


--
-- Data for Name: ocd_consumers; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.ocd_consumers (key, queue, consumer_id, created_ms, dead_letter_queue, settings) FROM stdin;
1	1	99999999999999999999999999999999	1800000000000	jobs-dlq	{"batch_size": 7, "max_retries": 2, "visibility_timeout_ms": 45000, "retry_delay": 3}
\.


--
-- Data for Name: ocd_counts; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.ocd_counts (queue, shard, count, bytes) FROM stdin;
1	0	1	5
1	7	8	68
1	6	1	10
2	3	1	4
4	3	6	12
\.


--
-- Data for Name: ocd_cron_ticks; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.ocd_cron_ticks (schedule, due_ms, node) FROM stdin;
*/5 * * * *	1800000000000	990a0e7a71d190f0
\.


--
-- Data for Name: ocd_dedup; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.ocd_dedup (queue, scope, dedup, expires_ms, message_id, fseq) FROM stdin;
4		dedup-a1	1800000300000	f1000000000000000000000000000000	1
4		dedup-b1	1800000300001	f2000000000000000000000000000000	2
4		dedup-a2	1800000300002	f3000000000000000000000000000000	3
4		dedup-c1	1800000300003	f4000000000000000000000000000000	4
4		dedup-b2	1800000300004	f5000000000000000000000000000000	5
4		dedup-c2	1800000300005	f6000000000000000000000000000000	6
\.


--
-- Data for Name: ocd_groups; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.ocd_groups (queue, grp, ready_ms) FROM stdin;
4	a	1800000300000
4	c	1800000000000
4	b	1800000600000
\.


--
-- Data for Name: ocd_messages; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.ocd_messages (seq, queue, id, content_type, body, size, sent_ms, visible_ms, attempts, lease, lease_kind, owner, grp, dedup, fseq, attrs, first_received_ms) FROM stdin;
3	1	aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa	bytes	\\x00012070757368	7	1799999820000	1800000300000	1	2777368394162785862	1	990a0e7a71d190f0	\N	\N	\N	\\x7b22737173223a202261747472696275746573227d	1800000000000
2	1	eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee	text	\\x72657472696564	7	1799999760000	1800000600000	1	\N	\N	\N	\N	\N	\N	\\x7b22737173223a202261747472696275746573227d	1800000000000
4	1	bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb	json	\\x7b2270756c6c223a20747275657d	14	1799999880000	1800000300000	1	4061449008970097894	2	\N	\N	\N	\N	\\x7b22737173223a202261747472696275746573227d	1800000000000
1	1	cccccccccccccccccccccccccccccccc	text	\\x7477696365	5	1799999700000	1800000000000	2	\N	\N	\N	\N	\N	\N	\\x7b22737173223a202261747472696275746573227d	1800000000000
5	1	00000000000000000000000000000001	json	\\x7b226e223a20317d	8	1800000000000	1800000000000	0	\N	\N	\N	\N	\N	\N	\\x7b22737173223a202261747472696275746573227d	\N
6	1	00000000000000000000000000000002	json	\\x7b226e223a20327d	8	1800000000001	1800000000000	0	\N	\N	\N	\N	\N	\N	\\x7b22737173223a202261747472696275746573227d	\N
7	1	00000000000000000000000000000003	json	\\x7b226e223a20337d	8	1800000000002	1800000000000	0	\N	\N	\N	\N	\N	\N	\\x7b22737173223a202261747472696275746573227d	\N
8	1	00000000000000000000000000000004	json	\\x7b226e223a20347d	8	1800000000003	1800000000000	0	\N	\N	\N	\N	\N	\N	\\x7b22737173223a202261747472696275746573227d	\N
9	1	00000000000000000000000000000005	json	\\x7b226e223a20357d	8	1800000000004	1800000000000	0	\N	\N	\N	\N	\N	\N	\\x7b22737173223a202261747472696275746573227d	\N
10	1	dddddddddddddddddddddddddddddddd	text	\\x696e20616e20686f7572	10	1800000000000	1800003600000	0	\N	\N	\N	\N	\N	\N	\\x7b22737173223a202261747472696275746573227d	\N
11	2	00000000000000000000000000000000	text	\\x64656164	4	1799999940000	1800000000000	0	\N	\N	\N	\N	\N	\N	\N	\N
12	4	f1000000000000000000000000000000	text	\\x6631	2	1800000000000	1800000300000	1	2756809729166592803	1	990a0e7a71d190f0	a	dedup-a1	1	\N	1800000000000
14	4	f3000000000000000000000000000000	text	\\x6633	2	1800000000002	1800000000000	0	\N	\N	\N	a	dedup-a2	3	\N	1800000000000
15	4	f4000000000000000000000000000000	text	\\x6634	2	1800000000003	1800000000000	0	\N	\N	\N	c	dedup-c1	4	\N	1800000000000
17	4	f6000000000000000000000000000000	text	\\x6636	2	1800000000005	1800000000000	0	\N	\N	\N	c	dedup-c2	6	\N	1800000000000
13	4	f2000000000000000000000000000000	text	\\x6632	2	1800000000001	1800000600000	1	\N	\N	\N	b	dedup-b1	2	\N	1800000000000
16	4	f5000000000000000000000000000000	text	\\x6635	2	1800000000004	1800000000000	0	\N	\N	\N	b	dedup-b2	5	\N	1800000000000
\.


--
-- Data for Name: ocd_meta; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.ocd_meta (key, value) FROM stdin;
database_id	\\x800a74955c8dd2458af0d2e1c0d154e4
lease-signing-key	\\x5750f3470f09ae7b55e08e1af4db3e9f4e8bb132e4f31022c820f0907c9a8327
clock_mark	\\x000001a3185c5000
\.


--
-- Data for Name: ocd_move_tasks; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.ocd_move_tasks (task_id, account, source_id, source, destination_id, destination, total, started_ms, done, state, error, finished_ms, rate, bound_sent, bound_seq, cursor_sent, cursor_seq, spec, node) FROM stdin;
77777777777777777777777777777777	local	b1e741fdf3f8a94f1d11ea67e8d2a857	jobs-dlq	cf607fb38e1c424931e4af82291cf581	jobs	1	1800000000000	0	running	\N	\N	\N	\N	\N	\N	\N	{}	990a0e7a71d190f0
\.


--
-- Data for Name: ocd_nodes; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.ocd_nodes (node_id, host, pid, started_at, heartbeat_at) FROM stdin;
990a0e7a71d190f0	vm	329	2026-12-05 07:01:45.144704+00	2026-12-05 07:01:45.144704+00
\.


--
-- Data for Name: ocd_queues; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.ocd_queues (key, account, name, queue_id, created_ms, modified_ms, delivery_delay_s, retention_s, paused, purged_ms, content_dedup, dedup_scope, fifo_seq, sqs_attrs, tags) FROM stdin;
2	local	jobs-dlq	b1e741fdf3f8a94f1d11ea67e8d2a857	1800000000000	1800000000000	0	345600	f	\N	f	queue	0	\N	\N
3	acme	paused	bf84dd6ba4b1b5204cd05438b1af5bdf	1800000000000	1800000000000	30	345600	t	\N	f	queue	0	\N	\N
1	local	jobs	cf607fb38e1c424931e4af82291cf581	1800000000000	1800000000000	0	604800	f	\N	f	queue	0	{"ReceiveMessageWaitTimeSeconds": "5"}	{"team": "billing"}
4	local	orders.fifo	1bcb604a24af5a7e4a1081e5351d03dc	1800000000000	1800000000000	0	345600	f	\N	t	queue	6	\N	\N
\.


--
-- Data for Name: ocd_schema; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.ocd_schema (version) FROM stdin;
8
\.


--
-- Name: ocd_consumers_key_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.ocd_consumers_key_seq', 1, true);


--
-- Name: ocd_messages_seq_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.ocd_messages_seq_seq', 17, true);


--
-- Name: ocd_queues_key_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.ocd_queues_key_seq', 4, true);


--
-- Name: ocd_consumers ocd_consumers_consumer_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_consumers
    ADD CONSTRAINT ocd_consumers_consumer_id_key UNIQUE (consumer_id);


--
-- Name: ocd_consumers ocd_consumers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_consumers
    ADD CONSTRAINT ocd_consumers_pkey PRIMARY KEY (key);


--
-- Name: ocd_consumers ocd_consumers_queue_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_consumers
    ADD CONSTRAINT ocd_consumers_queue_key UNIQUE (queue);


--
-- Name: ocd_counts ocd_counts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_counts
    ADD CONSTRAINT ocd_counts_pkey PRIMARY KEY (queue, shard);


--
-- Name: ocd_cron_ticks ocd_cron_ticks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_cron_ticks
    ADD CONSTRAINT ocd_cron_ticks_pkey PRIMARY KEY (schedule);


--
-- Name: ocd_dedup ocd_dedup_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_dedup
    ADD CONSTRAINT ocd_dedup_pkey PRIMARY KEY (queue, scope, dedup);


--
-- Name: ocd_groups ocd_groups_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_groups
    ADD CONSTRAINT ocd_groups_pkey PRIMARY KEY (queue, grp);


--
-- Name: ocd_messages ocd_messages_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_messages
    ADD CONSTRAINT ocd_messages_pkey PRIMARY KEY (seq);


--
-- Name: ocd_meta ocd_meta_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_meta
    ADD CONSTRAINT ocd_meta_pkey PRIMARY KEY (key);


--
-- Name: ocd_move_tasks ocd_move_tasks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_move_tasks
    ADD CONSTRAINT ocd_move_tasks_pkey PRIMARY KEY (task_id);


--
-- Name: ocd_nodes ocd_nodes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_nodes
    ADD CONSTRAINT ocd_nodes_pkey PRIMARY KEY (node_id);


--
-- Name: ocd_queues ocd_queues_account_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_queues
    ADD CONSTRAINT ocd_queues_account_name_key UNIQUE (account, name);


--
-- Name: ocd_queues ocd_queues_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_queues
    ADD CONSTRAINT ocd_queues_pkey PRIMARY KEY (key);


--
-- Name: ocd_queues ocd_queues_queue_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_queues
    ADD CONSTRAINT ocd_queues_queue_id_key UNIQUE (queue_id);


--
-- Name: ocd_dedup_expires; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ocd_dedup_expires ON public.ocd_dedup USING brin (expires_ms) WITH (autosummarize='on');


--
-- Name: ocd_groups_ready; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ocd_groups_ready ON public.ocd_groups USING btree (queue, ready_ms);


--
-- Name: ocd_messages_group; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ocd_messages_group ON public.ocd_messages USING btree (queue, grp, fseq) WHERE (grp IS NOT NULL);


--
-- Name: ocd_messages_owner; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ocd_messages_owner ON public.ocd_messages USING btree (owner) WHERE (owner IS NOT NULL);


--
-- Name: ocd_messages_sent; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ocd_messages_sent ON public.ocd_messages USING btree (queue, sent_ms);


--
-- Name: ocd_messages_visible; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ocd_messages_visible ON public.ocd_messages USING btree (queue, visible_ms);


--
-- Name: ocd_move_tasks_active; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX ocd_move_tasks_active ON public.ocd_move_tasks USING btree (source_id) WHERE ((destination_id IS NOT NULL) AND (state = ANY (ARRAY['running'::text, 'cancelling'::text])));


--
-- Name: ocd_consumers ocd_consumers_queue_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_consumers
    ADD CONSTRAINT ocd_consumers_queue_fkey FOREIGN KEY (queue) REFERENCES public.ocd_queues(key) ON DELETE CASCADE;


--
-- Name: ocd_counts ocd_counts_queue_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_counts
    ADD CONSTRAINT ocd_counts_queue_fkey FOREIGN KEY (queue) REFERENCES public.ocd_queues(key) ON DELETE CASCADE;


--
-- Name: ocd_dedup ocd_dedup_queue_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_dedup
    ADD CONSTRAINT ocd_dedup_queue_fkey FOREIGN KEY (queue) REFERENCES public.ocd_queues(key) ON DELETE CASCADE;


--
-- Name: ocd_groups ocd_groups_queue_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_groups
    ADD CONSTRAINT ocd_groups_queue_fkey FOREIGN KEY (queue) REFERENCES public.ocd_queues(key) ON DELETE CASCADE;


--
-- Name: ocd_messages ocd_messages_queue_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ocd_messages
    ADD CONSTRAINT ocd_messages_queue_fkey FOREIGN KEY (queue) REFERENCES public.ocd_queues(key) ON DELETE CASCADE;


--
-- PostgreSQL database dump complete
--

\unrestrict wMOygRZ2Fm49pF3l3CEMg0mcLoQY983IIJpxtBdB6pyfgXFOadwFfvo2SHp4M0h


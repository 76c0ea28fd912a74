// Prints the supergraph of the subgraphs in this directory, as
// `rover supergraph compose` would: `npx tsx examples/federation/supergraph.ts > supergraph.graphql`.
// PRODUCTS_URL, REVIEWS_URL and INVENTORY_URL say where the subgraphs are.
import { composeServices } from '@apollo/composition';
import { parse } from 'graphql';
import { SUBGRAPHS, typeDefs } from './subgraphs.js';

const defaults = { products: 'http://localhost:4001/', reviews: 'http://localhost:4002/', inventory: 'http://localhost:4003/' };
const result = composeServices(
  SUBGRAPHS.map((name) => ({ name, typeDefs: parse(typeDefs[name]), url: process.env[`${name.toUpperCase()}_URL`] ?? defaults[name] })),
);
if (result.errors !== undefined) throw new Error(`composition failed: ${result.errors.map((error) => error.message).join('; ')}`);
process.stdout.write(`${result.supergraphSdl}\n`);

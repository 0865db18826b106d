// Build the JupyterLab 3.6 application bundle + copy schemas/themes (after jupyterlab examples/app).
const data = require('./package.json');
const webpack = require('webpack');
const Build = require('@jupyterlab/builder').Build;
const crypto = require('crypto');

// Some loaders default to md4, unsupported by OpenSSL 3 in node >= 17.
const cryptoOrigCreateHash = crypto.createHash;
crypto.createHash = algorithm =>
  cryptoOrigCreateHash(algorithm == 'md4' ? 'sha256' : algorithm);

// Copies schemas to build/schemas, builds themes into build/themes and
// writes build/style.js (the CSS imports of every extension).
const extensionAssetConfig = Build.ensureAssets({
  packageNames: data.jupyterlab.extensions,
  output: './build',
  hashFunction: 'sha256'
});

const production = process.env.NODE_ENV === 'production';

module.exports = [
  {
    entry: ['whatwg-fetch', './index.js'],
    output: {
      path: __dirname + '/build',
      filename: 'bundle.js',
      hashFunction: 'sha256'
    },
    bail: true,
    devtool: false,
    mode: production ? 'production' : 'development',
    module: {
      rules: [
        { test: /\.css$/, use: ['style-loader', 'css-loader'] },
        { test: /\.html$/, use: 'file-loader' },
        { test: /\.md$/, use: 'raw-loader' },
        { test: /\.(jpg|png|gif)$/, use: 'file-loader' },
        { test: /\.js.map$/, use: 'file-loader' },
        { test: /\.woff2(\?v=\d+\.\d+\.\d+)?$/, use: 'url-loader?limit=10000&mimetype=application/font-woff' },
        { test: /\.woff(\?v=\d+\.\d+\.\d+)?$/, use: 'url-loader?limit=10000&mimetype=application/font-woff' },
        { test: /\.ttf(\?v=\d+\.\d+\.\d+)?$/, use: 'url-loader?limit=10000&mimetype=application/octet-stream' },
        { test: /\.eot(\?v=\d+\.\d+\.\d+)?$/, use: 'file-loader' },
        {
          // In .css files, svg is loaded as a data URI.
          test: /\.svg(\?v=\d+\.\d+\.\d+)?$/,
          issuer: /\.css$/,
          use: { loader: 'svg-url-loader', options: { encoding: 'none', limit: 10000 } }
        },
        {
          // In .js files, svg is loaded as a raw string.
          test: /\.svg(\?v=\d+\.\d+\.\d+)?$/,
          issuer: /\.js$/,
          use: { loader: 'raw-loader' }
        }
      ]
    },
    plugins: [
      new webpack.DefinePlugin({
        'process.env': '{}',
        process: { cwd: () => '/' }
      })
    ]
  }
].concat(extensionAssetConfig);
